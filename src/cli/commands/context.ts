import type { Command } from 'commander';
import { Cubby, CubbyError, type Mailbox } from '../../../packages/sdk/src/node.ts';
import { CLIENT_VERSION } from '../../version.ts';
import { readConfig, type Profile } from './config-file.ts';
import { CliError, colorEnabled, EXIT, notFound, Output, reportError, usage } from './output.ts';

// What every user command shares: the global options, the credential (flags, then CUBBY_*
// variables, then the profile), the SDK client, mailbox lookup by id, title or address, and the
// wrapper that turns any failure into a message and an exit code.

export interface GlobalOptions {
  json?: boolean;
  quiet?: boolean;
  color?: boolean;
  profile?: string;
  account?: string;
  url?: string;
  apiKey?: string;
}

export interface Ctx {
  out: Output;
  opts: GlobalOptions;
  profileName: string;
  profile: Profile | null;
  /** The SDK client; throws the "run cubby login" error when there is no credential. */
  cubby(): Cubby;
  baseUrl(): string;
  mailbox(ref: string): Promise<Mailbox>;
}

export function globalsOf(cmd: Command): GlobalOptions {
  return cmd.optsWithGlobals() as GlobalOptions;
}

export function makeCtx(cmd: Command): Ctx {
  const opts = globalsOf(cmd);
  const out = new Output({ json: Boolean(opts.json), quiet: Boolean(opts.quiet), color: colorEnabled(process.stdout, opts.color) });
  const config = readConfig();
  const profileName = opts.profile ?? process.env.CUBBY_PROFILE ?? config.default_profile;
  const profile = config.profiles[profileName] ?? null;
  let client: Cubby | null = null;
  const baseUrl = () => {
    const url = opts.url ?? process.env.CUBBY_URL ?? profile?.url;
    if (!url) throw new CliError('Not signed in: run `cubby login --url https://your-cubby` (or set CUBBY_URL and CUBBY_API_KEY).', EXIT.permission, 'NOT_SIGNED_IN');
    return url.replace(/\/+$/, '');
  };
  const cache = new Map<string, Mailbox>();
  const ctx: Ctx = {
    out,
    opts,
    profileName,
    profile,
    baseUrl,
    cubby() {
      if (client) return client;
      const apiKey = opts.apiKey ?? process.env.CUBBY_API_KEY ?? profile?.api_key;
      if (!apiKey) throw new CliError('Not signed in: run `cubby login` (or set CUBBY_API_KEY).', EXIT.permission, 'NOT_SIGNED_IN');
      const accountId = opts.account ?? process.env.CUBBY_ACCOUNT ?? profile?.account_id ?? undefined;
      client = new Cubby({ baseUrl: baseUrl(), apiKey, accountId, userAgent: `cubby-cli/${CLIENT_VERSION}` });
      return client;
    },
    async mailbox(ref: string) {
      const hit = cache.get(ref);
      if (hit) return hit;
      if (!ref) throw usage('A mailbox is required: its id (bkt_…), title or email address.');
      const cubby = ctx.cubby();
      let found: Mailbox | undefined;
      if (/^bkt_[A-Za-z0-9]+$/.test(ref)) {
        try {
          found = await cubby.mailboxes.get(ref);
        } catch (err) {
          if (!(err instanceof CubbyError && err.status === 404)) throw err;
        }
      } else {
        const wanted = ref.toLowerCase();
        const matches: Mailbox[] = [];
        for await (const m of cubby.mailboxes.list({ status: 'all', q: ref, limit: 100 })) {
          if (m.title?.toLowerCase() === wanted || m.email.address?.toLowerCase() === wanted || m.email.address?.toLowerCase().split('@')[0] === wanted) matches.push(m);
        }
        const exact = matches.filter((m) => m.title === ref || m.email.address === ref);
        const pick = exact.length === 1 ? exact : matches;
        if (pick.length > 1) throw new CliError(`"${ref}" names ${pick.length} mailboxes (${pick.map((m) => m.id).join(', ')}); use the id.`, EXIT.usage, 'AMBIGUOUS_MAILBOX');
        found = pick[0];
      }
      if (!found) throw notFound(`No mailbox "${ref}" (see \`cubby mailboxes ls\`).`, 'MAILBOX_NOT_FOUND');
      cache.set(ref, found);
      return found;
    },
  };
  return ctx;
}

/** Wraps an action: builds the context, runs, reports failures with the right exit code. */
export function action<A extends unknown[]>(fn: (ctx: Ctx, ...args: A) => Promise<void> | void) {
  return async (...args: unknown[]) => {
    const cmd = args[args.length - 1] as Command;
    let json = false;
    try {
      const ctx = makeCtx(cmd);
      json = ctx.out.json;
      await fn(ctx, ...(args.slice(0, -1) as A));
    } catch (err) {
      process.exitCode = reportError(err, json || Boolean(globalsOf(cmd).json));
    }
  };
}

/** `MAILBOX:PATH` → parts; null for a local path. */
export function parseRemote(arg: string): { mailbox: string; path: string } | null {
  const m = /^([^/:\\]+):(.*)$/s.exec(arg);
  if (!m) return null;
  return { mailbox: m[1]!, path: cleanRemotePath(m[2]!) };
}

/** A mailbox path without leading slashes; `..` and `.` segments are refused (paths are exact). */
export function cleanRemotePath(p: string): string {
  const trimmed = p.replace(/^\/+/, '');
  if (trimmed.split('/').some((s) => s === '..' || s === '.')) throw usage(`"${p}": mailbox paths may not contain . or .. segments`);
  return trimmed;
}

export function requireRemote(arg: string, what = 'MAILBOX:PATH'): { mailbox: string; path: string } {
  const r = parseRemote(arg);
  if (!r) throw usage(`"${arg}" is not ${what} (e.g. Invoices:reports/march.pdf)`);
  return r;
}
