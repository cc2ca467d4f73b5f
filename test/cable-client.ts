import { WebSocket } from 'ws';
import type { TestApp } from './harness.ts';

// A bare ActionCable client over `ws` for protocol tests: it records every frame and lets a test
// await the next frame it cares about (or the close), never a fixed time.

export const SUBPROTOCOLS = ['actioncable-v1-json', 'actioncable-unsupported'];

export interface Ticket {
  token: string;
  expires_in: number;
  channel: string;
  account_id: string;
  mailbox_id: string;
  websocket_url: string;
}

export async function ticket(app: TestApp, key: string, mailboxId: string): Promise<Ticket> {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/email/subscription`, { key });
  if (res.status !== 200) throw new Error(`subscription: ${res.status} ${res.text}`);
  return res.body.data.subscription;
}

export const cableUrl = (t: Ticket) => `${t.websocket_url}?email_subscription_token=${t.token}`;
export const identifierOf = (t: Ticket, extra: Record<string, unknown> = {}) => JSON.stringify({ channel: 'EmailReceivedChannel', account_id: t.account_id, mailbox_id: t.mailbox_id, ...extra });

export class RawCable {
  readonly frames: any[] = [];
  private seen = 0;
  private wake: (() => void) | null = null;
  closed = false;
  closeInfo: { code: number; reason: string } | null = null;

  private constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => {
      this.frames.push(JSON.parse(d.toString()));
      this.wake?.();
    });
    ws.on('close', (code, reason) => {
      this.closed = true;
      this.closeInfo = { code, reason: reason.toString() };
      this.wake?.();
    });
  }

  static async open(url: string, protocols = SUBPROTOCOLS): Promise<RawCable> {
    const ws = new WebSocket(url, protocols);
    const c = new RawCable(ws);
    await new Promise<void>((resolve, reject) => {
      ws.once('open', () => resolve());
      ws.once('error', reject);
    });
    return c;
  }

  send(frame: unknown): void {
    this.ws.send(typeof frame === 'string' ? frame : JSON.stringify(frame));
  }

  /** The next not-yet-returned frame matching `pred` (pings skipped unless asked for); null once closed without one. */
  async next(pred: (f: any) => boolean = (f) => f.type !== 'ping'): Promise<any | null> {
    for (;;) {
      while (this.seen < this.frames.length) {
        const f = this.frames[this.seen++];
        if (pred(f)) return f;
      }
      if (this.closed) return null;
      await new Promise<void>((r) => (this.wake = r));
    }
  }

  async subscribe(identifier: string): Promise<string> {
    this.send({ command: 'subscribe', identifier });
    const reply = await this.next((f) => f.identifier === identifier && (f.type === 'confirm_subscription' || f.type === 'reject_subscription'));
    return reply?.type ?? 'closed';
  }

  /** Waits for the close (after the server's disconnect frame, if any). */
  async whenClosed(): Promise<{ code: number; reason: string }> {
    while (!this.closed) await new Promise<void>((r) => (this.wake = r));
    return this.closeInfo!;
  }

  close(): void {
    this.ws.close();
  }
}

/** A connection that has been welcomed and subscribed to its mailbox. */
export async function subscribed(app: TestApp, key: string, mailboxId: string): Promise<{ cable: RawCable; t: Ticket; identifier: string }> {
  const t = await ticket(app, key, mailboxId);
  const cable = await RawCable.open(cableUrl(t));
  const welcome = await cable.next();
  if (welcome?.type !== 'welcome') throw new Error(`expected welcome, got ${JSON.stringify(welcome)}`);
  const identifier = identifierOf(t);
  if ((await cable.subscribe(identifier)) !== 'confirm_subscription') throw new Error('subscription rejected');
  return { cable, t, identifier };
}
