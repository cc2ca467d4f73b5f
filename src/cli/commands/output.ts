import { styleText } from 'node:util';
import { CubbyError } from '../../../packages/sdk/src/index.ts';

// How the CLI talks: one JSON document (or JSON lines for streams) with --json, plain lines
// otherwise; colours only on a terminal and never with NO_COLOR; exit codes that say what
// kind of failure it was, so scripts and agents can branch on them.

export const EXIT = { ok: 0, error: 1, usage: 2, notFound: 3, permission: 4, conflict: 5, temporary: 75, interrupted: 130 } as const;

export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT.error,
    readonly code: string = 'CLI_ERROR',
    readonly requestId: string | null = null,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
  }
}

export const usage = (message: string) => new CliError(message, EXIT.usage, 'USAGE');
export const notFound = (message: string, code = 'NOT_FOUND') => new CliError(message, EXIT.notFound, code);

export interface OutputOptions {
  json: boolean;
  quiet: boolean;
  color: boolean;
}

export function colorEnabled(stream: NodeJS.WriteStream, flag: boolean | undefined): boolean {
  if (flag === false) return false;
  if (process.env.NO_COLOR !== undefined && process.env.NO_COLOR !== '') return false;
  return Boolean(stream.isTTY);
}

export class Output {
  constructor(readonly opts: OutputOptions) {}

  get json() {
    return this.opts.json;
  }

  paint(style: Parameters<typeof styleText>[0], text: string): string {
    return this.opts.color ? styleText(style, text) : text;
  }

  /** A line of human output (not with --json or --quiet). */
  line(text = ''): void {
    if (!this.opts.json && !this.opts.quiet) process.stdout.write(`${text}\n`);
  }

  /** The command's result: JSON with --json, else the given human rendering (printed even with --quiet). */
  result(value: unknown, human?: () => void): void {
    if (this.opts.json) process.stdout.write(`${JSON.stringify(value, null, 2)}\n`);
    else human?.();
  }

  /** One item of a stream: a JSON line with --json, else a text line. */
  item(value: unknown, text: string): void {
    process.stdout.write(this.opts.json ? `${JSON.stringify(value)}\n` : `${text}\n`);
  }

  /** Notes for people (progress, hints) go to stderr, so stdout stays clean for pipes. */
  note(text: string): void {
    if (!this.opts.quiet && !this.opts.json) process.stderr.write(`${text}\n`);
  }

  table(rows: Record<string, unknown>[], columns: string[]): void {
    if (this.opts.json) return this.result(rows);
    if (!rows.length) return;
    const cells = rows.map((r) => columns.map((c) => (r[c] === null || r[c] === undefined ? '' : String(r[c]))));
    const widths = columns.map((c, i) => Math.max(c.length, ...cells.map((row) => row[i]!.length)));
    const fmt = (vals: string[]) => vals.map((v, i) => (i === vals.length - 1 ? v : v.padEnd(widths[i]!))).join('  ').trimEnd();
    if (!this.opts.quiet) process.stdout.write(`${this.paint('bold', fmt(columns.map((c) => c.toUpperCase())))}\n`);
    for (const row of cells) process.stdout.write(`${fmt(row)}\n`);
  }
}

export function exitCodeOf(err: unknown): number {
  if (err instanceof CliError) return err.exitCode;
  if (err instanceof CubbyError) {
    if (err.status === 0 || err.status === 429 || err.status === 503 || err.status >= 500) return err.status >= 500 && err.status !== 503 ? EXIT.error : EXIT.temporary;
    if (err.status === 404) return EXIT.notFound;
    if (err.status === 401 || err.status === 403) return EXIT.permission;
    if (err.status === 409 || err.status === 423) return EXIT.conflict;
    return EXIT.error;
  }
  return EXIT.error;
}

/** Prints the error (code and request id included) and returns the exit code. */
export function reportError(err: unknown, json: boolean): number {
  const code = exitCodeOf(err);
  let body: { code: string; message: string; status?: number; request_id?: string | null; details?: Record<string, unknown> };
  if (err instanceof CubbyError) {
    let message = err.message;
    if (err.status === 401) message += ' Run `cubby login` (or set CUBBY_API_KEY).';
    body = { code: err.code, message, status: err.status, request_id: err.requestId, details: err.details };
  } else if (err instanceof CliError) body = { code: err.code, message: err.message, request_id: err.requestId, details: err.details };
  else body = { code: 'CLI_ERROR', message: err instanceof Error ? err.message : String(err) };
  if (json) process.stderr.write(`${JSON.stringify({ error: { ...body, exit_code: code } })}\n`);
  else process.stderr.write(`error: ${body.code === 'USAGE' || body.code === 'CLI_ERROR' ? '' : `${body.code}: `}${body.message}${body.request_id ? ` (request id ${body.request_id})` : ''}\n`);
  return code;
}

export function formatBytes(n: number): string {
  if (n < 1024) return `${Math.round(n)} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let i = -1;
  do {
    v /= 1024;
    i++;
  } while (v >= 1024 && i < units.length - 1);
  return `${v.toFixed(v < 10 ? 1 : 0)} ${units[i]}`;
}
