import type { LiveBinding } from './access.ts';

// One WebSocket connection speaking the ActionCable wire protocol (`actioncable-v1-json`), as the
// stock @rails/actioncable client expects it: server frames are `welcome`, `ping`,
// `confirm_subscription` / `reject_subscription`, `disconnect` and `{identifier, message}` pushes;
// client frames are `{command: "subscribe" | "unsubscribe" | "message", identifier, data?}`.
// The only channel is EmailReceivedChannel, bound to the account and mailbox of the ticket.

export const CHANNEL = 'EmailReceivedChannel';
export const SUBPROTOCOL = 'actioncable-v1-json';

export interface LiveLimits {
  maxSubscriptions: number;
  maxCommandBytes: number;
  /** Token bucket for client commands: burst size and refill per second. */
  commandBurst: number;
  commandsPerSecond: number;
  /** A client that reads slower than this much queued output is dropped. */
  maxBufferedBytes: number;
}

/** What the connection needs from a ws socket (kept small so tests and the hub agree on it). */
export interface CableSocket {
  readonly readyState: number;
  readonly bufferedAmount: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
}

export type DisconnectReason = 'unauthorized' | 'invalid_request' | 'too_many_requests' | 'too_many_connections' | 'slow_consumer' | 'server_restart';

const OPEN = 1;

export class CableConnection {
  /** Subscribed identifiers, exactly as the client sent them (pushes echo them back). */
  readonly identifiers = new Set<string>();
  private tokens: number;
  private refilledAt = Date.now();
  closed = false;

  constructor(
    readonly id: string,
    readonly socket: CableSocket,
    readonly binding: LiveBinding,
    private readonly limits: LiveLimits,
    private readonly onClose: (c: CableConnection) => void,
  ) {
    this.tokens = limits.commandBurst;
  }

  send(frame: string): void {
    if (this.closed || this.socket.readyState !== OPEN) return;
    if (this.socket.bufferedAmount > this.limits.maxBufferedBytes) return this.disconnect('slow_consumer');
    this.socket.send(frame);
  }

  /** Tells the client why and that reconnecting with this ticket is pointless, then closes. */
  disconnect(reason: DisconnectReason): void {
    if (this.closed) return;
    if (this.socket.readyState === OPEN) this.socket.send(JSON.stringify({ type: 'disconnect', reason, reconnect: false }));
    this.closed = true;
    this.socket.close(reason === 'server_restart' ? 1001 : 1000, reason);
    this.onClose(this);
  }

  /** The socket went away on its own. */
  gone(): void {
    if (this.closed) return;
    this.closed = true;
    this.onClose(this);
  }

  /** One client frame. Bad frames end the connection; unknown commands are ignored. */
  receive(data: Buffer | string, isBinary: boolean): void {
    if (this.closed) return;
    const size = typeof data === 'string' ? Buffer.byteLength(data) : data.length;
    if (isBinary || size > this.limits.maxCommandBytes) return this.disconnect('invalid_request');
    if (!this.takeToken()) return this.disconnect('too_many_requests');
    let cmd: { command?: unknown; identifier?: unknown };
    try {
      cmd = JSON.parse(data.toString());
    } catch {
      return this.disconnect('invalid_request');
    }
    if (!cmd || typeof cmd !== 'object' || typeof cmd.identifier !== 'string') return this.disconnect('invalid_request');
    const identifier = cmd.identifier;
    if (cmd.command === 'subscribe') return this.subscribe(identifier);
    if (cmd.command === 'unsubscribe') {
      this.identifiers.delete(identifier);
      return;
    }
    // `message` (channel actions): EmailReceivedChannel has none; anything else is not ours.
  }

  private subscribe(identifier: string): void {
    const reply = (type: string) => this.send(JSON.stringify({ identifier, type }));
    if (this.identifiers.has(identifier)) return reply('confirm_subscription');
    if (!this.acceptable(identifier) || this.identifiers.size >= this.limits.maxSubscriptions) return reply('reject_subscription');
    this.identifiers.add(identifier);
    reply('confirm_subscription');
  }

  /** The identifier names our channel and, where it says, the ticket's own account and mailbox. */
  private acceptable(identifier: string): boolean {
    let id: Record<string, unknown>;
    try {
      id = JSON.parse(identifier);
    } catch {
      return false;
    }
    if (!id || typeof id !== 'object' || id.channel !== CHANNEL) return false;
    if (id.account_id !== undefined && id.account_id !== this.binding.accountId) return false;
    if (id.mailbox_id !== undefined && id.mailbox_id !== this.binding.mailboxId) return false;
    return true;
  }

  /** Pushes one event body (the webhook JSON text) to every subscription of this connection. */
  push(body: string): void {
    for (const identifier of this.identifiers) this.send(`{"identifier":${JSON.stringify(identifier)},"message":${body}}`);
  }

  private takeToken(): boolean {
    const now = Date.now();
    this.tokens = Math.min(this.limits.commandBurst, this.tokens + ((now - this.refilledAt) / 1000) * this.limits.commandsPerSecond);
    this.refilledAt = now;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}
