// A session probe for `PROBE=1 npm run bench:smtp`: while the load runs, one more client opens SMTP
// sessions back to back (one message each, as smtp-source sends them, no pipelining) and times every
// step from the client's side: the TCP connect, the greeting, each command's reply, the end of DATA
// → 250, QUIT → 221 and the server's close. It answers where a session's time goes under load: with
// 20 sessions and one message per connection, messages/s is 20 ÷ the session's length, and every
// step but the connect waits for the server's event loop.
import { once } from 'node:events';
import { round } from './lib.ts';
import { Connection, percentile } from './smtp-client.ts';

const STEPS = ['connect', 'greeting', 'ehlo', 'mail', 'rcpt', 'data', 'end_of_data', 'quit', 'close'] as const;
type Step = (typeof STEPS)[number];

export class SessionProbe {
  /** Messages the server answered 250 at the end of DATA (the harness subtracts them from its counts). */
  accepted = 0;
  private readonly times = new Map<Step | 'session', number[]>([...STEPS, 'session' as const].map((s) => [s, []]));
  private running = false;
  /** Once stopped it stays stopped: the harness calls start() at every sample past its 10 % mark. */
  private stopped = false;
  private loop: Promise<void> | null = null;
  private error: string | null = null;

  /** `message`: dot-stuffed, CRLF, ending in CRLF, without the final ".\r\n". */
  constructor(
    private readonly port: number,
    private readonly rcpt: string,
    private readonly message: Buffer,
  ) {}

  start(): void {
    if (this.running || this.stopped) return;
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        try {
          await this.session();
        } catch (err) {
          // It measures, it does not retry: the first failure ends the probe and is reported.
          this.error = String((err as Error).message ?? err).slice(0, 200);
          this.running = false;
        }
      }
    })();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.running = false;
    await this.loop;
  }

  /** Per step and for the whole session, in ms: p50, p90 and mean over the sessions that finished. */
  summary() {
    const stats = (xs: number[]) => {
      const at = (p: number) => (xs.length ? round(percentile(xs, p)!, 2) : null);
      return { p50: at(50), p90: at(90), mean: xs.length ? round(xs.reduce((a, b) => a + b, 0) / xs.length, 2) : null };
    };
    return { sessions: this.times.get('session')!.length, error: this.error, ...Object.fromEntries([...this.times].map(([step, xs]) => [step, stats(xs)])) };
  }

  private async session(): Promise<void> {
    const started = performance.now();
    let last = started;
    const steps: [Step, number][] = [];
    const mark = (step: Step) => {
      const now = performance.now();
      steps.push([step, now - last]);
      last = now;
    };
    const conn = Connection.connect('127.0.0.1', this.port);
    const { socket } = conn;
    // A server that stops answering ends the probe (its error is in the summary) instead of the bench.
    socket.setTimeout(60_000, () => socket.destroy(new Error('no reply in 60 s')));
    try {
      await once(socket, 'connect');
      mark('connect');
      const exchange = async (step: Step, code: number, command?: string | Buffer) => {
        if (command !== undefined) socket.write(command);
        const reply = await conn.reply();
        if (reply.code !== code) throw new Error(`${step}: ${reply.code} ${reply.text.slice(0, 120)}`);
        mark(step);
      };
      await exchange('greeting', 220);
      await exchange('ehlo', 250, 'EHLO probe.test\r\n');
      await exchange('mail', 250, 'MAIL FROM:<probe@source.test>\r\n');
      await exchange('rcpt', 250, `RCPT TO:<${this.rcpt}>\r\n`);
      await exchange('data', 354, 'DATA\r\n');
      await exchange('end_of_data', 250, Buffer.concat([this.message, Buffer.from('.\r\n')]));
      this.accepted++;
      await exchange('quit', 221, 'QUIT\r\n');
      if (!socket.closed) await once(socket, 'close');
      mark('close');
    } finally {
      socket.destroy();
    }
    for (const [step, ms] of steps) this.times.get(step)!.push(ms);
    this.times.get('session')!.push(performance.now() - started);
  }
}
