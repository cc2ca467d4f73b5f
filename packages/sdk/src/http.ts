import { CubbyError, errorFromResponse, RETRIED_STATUSES } from './errors.ts';

// The one place requests are made: base URL, bearer key, the selected account, JSON in and out,
// unwrapping of both surfaces' envelopes, and retries of temporary answers.

export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

export interface RetryOptions {
  /** Attempts after the first (default 3). */
  retries?: number;
  /** Longest wait the SDK accepts before a retry, in seconds (default 60); a longer Retry-After fails at once. */
  maxDelaySeconds?: number;
  /** Called before each retry (logging, tests). */
  onRetry?: (info: { attempt: number; delaySeconds: number; error: CubbyError; method: string; path: string }) => void;
}

export interface TransportOptions {
  /** Where the service runs, e.g. `https://cubby.example.com` (no /v1). */
  baseUrl: string;
  /** A `cubby_…` API key or an OAuth access token. */
  apiKey?: string;
  /** Act on this granted account instead of the key's default one. */
  accountId?: string;
  fetch?: FetchLike;
  retry?: RetryOptions;
  /** How the SDK waits between retries (default setTimeout); tests may advance a clock instead. */
  sleep?: (ms: number) => Promise<void>;
  /** Sent as user-agent where the platform allows it (Node), e.g. `cubby-cli/0.1.0`. */
  userAgent?: string;
}

export interface RequestSpec {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  path: string;
  query?: Record<string, unknown> | undefined;
  body?: Record<string, unknown> | undefined;
  /**
   * Whether the request may be repeated automatically (after a network failure or an answer in
   * RETRIED_STATUSES). Defaults to true for GET, PUT, PATCH and DELETE and false for POST (creates
   * are never repeated automatically: a second mailbox or email could result); POSTs that are safe
   * to repeat (upload steps, archive) say so.
   */
  retry?: boolean;
  /** Statuses answered without throwing (their body is returned), e.g. 202 is always fine. */
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
}

export interface RawResult<T = unknown> {
  status: number;
  headers: Headers;
  body: T;
}

const NEVER_RETRIED = new Set(['EMAIL_SEND_RATE_LIMITED']);

const defaultSleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export class Transport {
  readonly baseUrl: string;
  apiKey: string | undefined;
  accountId: string | undefined;
  private readonly fetchImpl: FetchLike;
  private readonly retry: Required<Omit<RetryOptions, 'onRetry'>> & Pick<RetryOptions, 'onRetry'>;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly userAgent: string | undefined;

  constructor(opts: TransportOptions) {
    if (!opts.baseUrl) throw new TypeError('baseUrl is required, e.g. https://cubby.example.com');
    this.baseUrl = opts.baseUrl.replace(/\/+$/, '');
    this.apiKey = opts.apiKey;
    this.accountId = opts.accountId;
    this.fetchImpl = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.retry = { retries: opts.retry?.retries ?? 3, maxDelaySeconds: opts.retry?.maxDelaySeconds ?? 60, onRetry: opts.retry?.onRetry };
    this.sleep = opts.sleep ?? defaultSleep;
    this.userAgent = opts.userAgent;
  }

  url(path: string, query?: Record<string, unknown>): string {
    const u = new URL(this.baseUrl + path);
    for (const [k, v] of Object.entries(query ?? {})) {
      if (v === undefined || v === null) continue;
      u.searchParams.set(k, String(v));
    }
    return u.toString();
  }

  /** Sends one request (retrying when allowed); returns the parsed body of a 2xx answer. */
  async raw<T = unknown>(spec: RequestSpec): Promise<RawResult<T>> {
    const reads = spec.method === 'GET' || spec.method === 'DELETE';
    let query = spec.query;
    let body = spec.body;
    // account_id goes in the query of reads and the body of writes (the spec's convention).
    if (this.accountId) {
      if (reads) query = { account_id: this.accountId, ...query };
      else body = { account_id: this.accountId, ...body };
    }
    const url = this.url(spec.path, query);
    const headers: Record<string, string> = { accept: 'application/json', ...spec.headers };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    if (this.userAgent) headers['user-agent'] = this.userAgent;
    const payload = body !== undefined && !reads ? JSON.stringify(body) : undefined;
    if (payload !== undefined) headers['content-type'] = 'application/json';
    const retryable = spec.retry ?? spec.method !== 'POST';

    for (let attempt = 0; ; attempt++) {
      let res: Response;
      try {
        res = await this.fetchImpl(url, { method: spec.method, headers, body: payload, signal: spec.signal });
      } catch (err) {
        if (spec.signal?.aborted) throw err;
        const error = new CubbyError({ code: 'NETWORK_ERROR', status: 0, message: `${spec.method} ${spec.path}: ${(err as Error).message}`, cause: err });
        // A request that may never have arrived is repeated only when repeating is harmless.
        if (retryable && attempt < this.retry.retries) {
          await this.wait(attempt, Math.min(8, 0.5 * 2 ** attempt), error, spec);
          continue;
        }
        throw error;
      }
      const text = await res.text();
      let parsed: unknown = undefined;
      if (text) {
        try {
          parsed = JSON.parse(text);
        } catch {
          parsed = text;
        }
      }
      if (res.ok) return { status: res.status, headers: res.headers, body: parsed as T };
      const error = errorFromResponse(res.status, res.headers, parsed, text);
      if (retryable && RETRIED_STATUSES.has(res.status) && !NEVER_RETRIED.has(error.code) && attempt < this.retry.retries) {
        const delay = error.retryAfter ?? Math.min(8, 0.5 * 2 ** attempt);
        if (delay <= this.retry.maxDelaySeconds) {
          await this.wait(attempt, delay, error, spec);
          continue;
        }
      }
      throw error;
    }
  }

  private async wait(attempt: number, delaySeconds: number, error: CubbyError, spec: RequestSpec) {
    this.retry.onRetry?.({ attempt: attempt + 1, delaySeconds, error, method: spec.method, path: spec.path });
    await this.sleep(delaySeconds * 1000);
  }

  /** Surface R: `{success, data}` → data. Surface A: `{data}` → data. */
  async data<T>(spec: RequestSpec): Promise<T> {
    const res = await this.raw<{ data?: T }>(spec);
    const b = res.body;
    return (b && typeof b === 'object' && 'data' in b ? b.data : b) as T;
  }
}
