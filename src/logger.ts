import pino, { type DestinationStream, type Logger } from 'pino';
import pretty from 'pino-pretty';

export type { Logger };

export interface LoggerOptions {
  level: string;
  /** json (default): one object per line for collectors; pretty: for a person at a terminal. */
  format?: 'json' | 'pretty';
  /** Where lines go (default stdout); tests collect them. */
  destination?: DestinationStream;
}

// Secrets never reach logs: credentials, cookies and password fields are redacted. The request
// lines themselves carry no headers, query strings or bodies (see src/http/request-log.ts).
const REDACT = [
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'headers.cookie',
  '*.password',
  '*.api_key',
  '*.token',
  '*.signing_secret',
];

export function createLogger(opts: LoggerOptions): Logger {
  const base = { level: opts.level, redact: { paths: REDACT, censor: '[redacted]' } };
  if (opts.format === 'pretty') {
    // A stream in this thread, not a worker transport: lines are written in order and none are
    // lost when the process exits right after a shutdown line.
    const stream = pretty({ colorize: !opts.destination && Boolean(process.stdout.isTTY), sync: true, translateTime: 'SYS:HH:MM:ss.l', ignore: 'pid,hostname', destination: opts.destination as NodeJS.WritableStream | undefined });
    return pino(base, stream);
  }
  return opts.destination ? pino(base, opts.destination) : pino(base);
}
