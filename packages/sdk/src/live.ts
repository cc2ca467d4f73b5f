import { CubbyError } from './errors.ts';
import type { Transport } from './http.ts';
import type { EmailSummary, LiveTicket, Pagination } from './types.ts';

// live.subscribe: new mail as it arrives, over the ActionCable channel, without ever missing one.
// Pushes are only a signal; the emails themselves come from the ascending email list read with
// the saved cursor, after every (re)connect and after every push (docs/events.md). So mail that
// arrived while disconnected is caught up, in order, exactly once.

/** The part of the WebSocket interface the SDK uses (browsers' and `ws`'s both fit). */
export interface WebSocketLike {
  readonly readyState: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onclose: ((ev: { code?: number; reason?: string }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}
export type WebSocketConstructor = new (url: string, protocols?: string | string[]) => WebSocketLike;

export type LiveState = 'connecting' | 'connected' | 'disconnected' | 'closed';

export interface SubscribeOptions {
  /** Saved cursor of an earlier run: emails after it are delivered first. */
  cursor?: string | null;
  /** Without a cursor: `now` (default) delivers only mail that arrives from now on; `beginning` delivers every email. */
  from?: 'now' | 'beginning';
  /** Called with the new cursor whenever it moves: save it to resume later. */
  onCursor?: (cursor: string) => void | Promise<void>;
  onState?: (state: LiveState, info?: { reason?: string; attempt?: number }) => void;
  /** Errors that do not stop the subscription (a failed reconnect, a failing onEmail). */
  onError?: (err: unknown) => void;
  /** Awaited before each reconnect (e.g. to wait for the network to come back). */
  beforeReconnect?: (attempt: number) => void | Promise<void>;
  /** Delay before reconnect attempt n (default 0.5 s doubling, at most 30 s). */
  reconnectDelayMs?: (attempt: number) => number;
  /** The WebSocket class (default: globalThis.WebSocket; the Node entry passes `ws`). */
  WebSocket?: WebSocketConstructor;
  accountId?: string;
}

export interface Subscription {
  /** Resolves once the first connection is subscribed and caught up. */
  readonly ready: Promise<void>;
  /** The cursor after the last email delivered. */
  readonly cursor: string | null;
  /** How many times the connection was re-established. */
  readonly reconnects: number;
  close(): Promise<void>;
}

const PROTOCOLS = ['actioncable-v1-json', 'actioncable-unsupported'];
const STALE_MS = 10_000; // the server pings every 3 s

export function subscribe(transport: Transport, mailboxId: string, onEmail: (email: EmailSummary) => void | Promise<void>, opts: SubscribeOptions = {}): Subscription {
  const WS = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketConstructor }).WebSocket;
  if (!WS) throw new TypeError('No WebSocket implementation: pass { WebSocket } (in Node 20, import Cubby from "@cubby/sdk/node")');
  let cursor: string | null = opts.cursor ?? null;
  let draining = !opts.cursor && (opts.from ?? 'now') === 'now';
  let closed = false;
  let reconnects = 0;
  let socket: WebSocketLike | null = null;
  let readyResolve!: () => void;
  let readyReject!: (err: unknown) => void;
  const ready = new Promise<void>((res, rej) => {
    readyResolve = res;
    readyReject = rej;
  });
  ready.catch(() => undefined);
  let isReady = false;
  const seen = new Set<string>();
  const seenOrder: string[] = [];
  const query = (extra: Record<string, unknown>) => ({ ...(opts.accountId ? { account_id: opts.accountId } : {}), ...extra });

  // Catch-up runs one at a time; a push during a run asks for one more run afterwards.
  let running: Promise<void> | null = null;
  let again = false;
  const catchUp = (): Promise<void> => {
    if (running) {
      again = true;
      return running;
    }
    running = (async () => {
      do {
        again = false;
        for (;;) {
          const body = await transport.data<{ emails: EmailSummary[]; pagination: Pagination }>({
            method: 'GET',
            path: `/v1/mailboxes/${mailboxId}/emails`,
            query: query({ order: 'asc', limit: 100, ...(cursor ? { cursor } : {}) }),
          });
          for (const email of body.emails) {
            if (draining || seen.has(email.id)) continue;
            seen.add(email.id);
            seenOrder.push(email.id);
            if (seenOrder.length > 1000) seen.delete(seenOrder.shift()!);
            try {
              await onEmail(email);
            } catch (err) {
              opts.onError?.(err);
            }
          }
          if (body.pagination.next_cursor && body.pagination.next_cursor !== cursor) {
            cursor = body.pagination.next_cursor;
            await opts.onCursor?.(cursor);
          }
          if (!body.pagination.has_more) break;
        }
        draining = false;
      } while (again && !closed);
    })().finally(() => {
      running = null;
    });
    return running;
  };

  const connectOnce = async (): Promise<string> => {
    const ticket = (await transport.data<{ subscription: LiveTicket }>({ method: 'GET', path: `/v1/mailboxes/${mailboxId}/email/subscription`, query: query({}) })).subscription;
    if (closed) return 'closed';
    const identifier = JSON.stringify({ channel: ticket.channel || 'EmailReceivedChannel', account_id: ticket.account_id, mailbox_id: ticket.mailbox_id });
    const url = `${ticket.websocket_url}${ticket.websocket_url.includes('?') ? '&' : '?'}email_subscription_token=${encodeURIComponent(ticket.token)}`;
    return new Promise<string>((resolve) => {
      const ws = new WS(url, PROTOCOLS);
      socket = ws;
      let lastFrame = Date.now();
      let reason = 'closed';
      const watchdog = setInterval(() => {
        if (Date.now() - lastFrame > STALE_MS) {
          reason = 'stale';
          ws.close();
        }
      }, 2_000);
      const finish = () => {
        clearInterval(watchdog);
        if (socket === ws) socket = null;
        resolve(reason);
      };
      ws.onerror = () => undefined; // onclose follows
      ws.onclose = () => finish();
      ws.onmessage = (ev) => {
        lastFrame = Date.now();
        let frame: { type?: string; identifier?: string; message?: unknown; reason?: string };
        try {
          frame = JSON.parse(typeof ev.data === 'string' ? ev.data : new TextDecoder().decode(ev.data as Uint8Array));
        } catch {
          return;
        }
        if (frame.type === 'welcome') ws.send(JSON.stringify({ command: 'subscribe', identifier }));
        else if (frame.type === 'confirm_subscription') {
          opts.onState?.('connected');
          // Subscribed: from now on no push can be missed, so reading the list now misses nothing.
          catchUp().then(
            () => {
              if (!isReady) {
                isReady = true;
                readyResolve();
              }
            },
            (err) => {
              opts.onError?.(err);
              ws.close();
            },
          );
        } else if (frame.type === 'reject_subscription') {
          reason = 'rejected';
          ws.close();
        } else if (frame.type === 'disconnect') {
          reason = frame.reason ?? 'disconnect';
        } else if (frame.identifier !== undefined && frame.message !== undefined) {
          catchUp().catch((err) => opts.onError?.(err));
        }
      };
    });
  };

  void (async () => {
    // Starting "now": walk to the end of the list before connecting, so that the catch-up after
    // the subscription is confirmed delivers everything that arrives from here on (mail arriving
    // while this walk runs included).
    if (draining) {
      try {
        await catchUp();
      } catch (err) {
        closed = true;
        opts.onState?.('closed', { reason: err instanceof CubbyError ? err.code : 'error' });
        readyReject(err);
        return;
      }
    }
    for (let attempt = 0; !closed; attempt++) {
      opts.onState?.('connecting', { attempt });
      let reason: string;
      try {
        reason = await connectOnce();
        if (isReady) attempt = 0;
      } catch (err) {
        // No ticket: a missing key or mailbox will not get better by retrying.
        if (err instanceof CubbyError && !err.temporary) {
          closed = true;
          opts.onState?.('closed', { reason: err.code });
          if (!isReady) readyReject(err);
          else opts.onError?.(err);
          return;
        }
        opts.onError?.(err);
        reason = 'error';
      }
      if (closed) break;
      opts.onState?.('disconnected', { reason, attempt });
      await opts.beforeReconnect?.(attempt);
      const delay = opts.reconnectDelayMs?.(attempt) ?? Math.min(30_000, 500 * 2 ** attempt);
      await new Promise((r) => setTimeout(r, delay));
      if (!closed) reconnects++;
    }
    opts.onState?.('closed');
  })();

  return {
    ready,
    get cursor() {
      return cursor;
    },
    get reconnects() {
      return reconnects;
    },
    async close() {
      closed = true;
      socket?.close();
      await running?.catch(() => undefined);
    },
  };
}
