// A session probe for `PROBE=1 npm run bench:smtp`: while the load runs, one more client opens SMTP
// sessions back to back (one message each, as smtp-source sends them, no pipelining) and times every
// step from the client's side: the TCP connect, the greeting, each command's reply, the end of DATA
// → 250, QUIT → 221 and the server's close. It answers where a session's time goes under load: with
// 20 sessions and one message per connection, messages/s is 20 ÷ the session's length, and every
// step but the connect waits for the server's event loop.
import net from 'node:net';
import { round } from './lib.ts';

export const PROBE_STEPS = ['connect', 'greeting', 'ehlo', 'mail', 'rcpt', 'data', 'end_of_data', 'quit', 'close'] as const;
type Step = (typeof PROBE_STEPS)[number];

/** What each reply must start with; anything else stops the probe (it measures, it does not retry). */
const EXPECTED: Partial<Record<Step, string>> = { greeting: '220', ehlo: '250', mail: '250', rcpt: '250', data: '354', end_of_data: '250', quit: '221' };

export class SessionProbe {
  /** Messages the server answered 250 at the end of DATA (the harness subtracts them from its counts). */
  accepted = 0;
  private readonly times = new Map<Step, number[]>(PROBE_STEPS.map((s) => [s, []]));
  private readonly totals: number[] = [];
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

  /** Per step, in ms: p50, p90 and mean over the sessions that finished. */
  summary() {
    const stats = (xs: number[]) => {
      const s = [...xs].sort((a, b) => a - b);
      const at = (p: number) => (s.length ? round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!, 2) : null);
      return { p50: at(50), p90: at(90), mean: s.length ? round(s.reduce((a, b) => a + b, 0) / s.length, 2) : null };
    };
    return {
      sessions: this.totals.length,
      error: this.error,
      session: stats(this.totals),
      ...Object.fromEntries(PROBE_STEPS.map((step) => [step, stats(this.times.get(step)!)])),
    };
  }

  private session(): Promise<void> {
    return new Promise((resolve, reject) => {
      const started = performance.now();
      let last = started;
      const steps: [Step, number][] = [];
      const mark = (step: Step) => {
        const now = performance.now();
        steps.push([step, now - last]);
        last = now;
      };
      const socket = net.connect(this.port, '127.0.0.1');
      socket.setNoDelay(true);
      // A server that stops answering ends the probe (its error is in the summary) instead of the bench.
      socket.setTimeout(60_000, () => socket.destroy(new Error('no reply in 60 s')));
      const order: Step[] = ['greeting', 'ehlo', 'mail', 'rcpt', 'data', 'end_of_data', 'quit'];
      const next: Partial<Record<Step, () => void>> = {
        greeting: () => socket.write('EHLO probe.test\r\n'),
        ehlo: () => socket.write('MAIL FROM:<probe@source.test>\r\n'),
        mail: () => socket.write(`RCPT TO:<${this.rcpt}>\r\n`),
        rcpt: () => socket.write('DATA\r\n'),
        data: () => socket.write(Buffer.concat([this.message, Buffer.from('.\r\n')])),
        end_of_data: () => {
          this.accepted++;
          socket.write('QUIT\r\n');
        },
      };
      let pending = '';
      let index = 0;
      const fail = (why: string) => {
        socket.destroy();
        reject(new Error(why));
      };
      socket.once('connect', () => mark('connect'));
      socket.on('data', (chunk: Buffer) => {
        pending += chunk.toString('latin1');
        // A reply is complete at a line whose code is followed by a space (RFC 5321 §4.2.1).
        while (index < order.length) {
          const end = pending.indexOf('\r\n');
          if (end < 0) return;
          const line = pending.slice(0, end);
          pending = pending.slice(end + 2);
          if (line[3] === '-') continue;
          const step = order[index++]!;
          if (!line.startsWith(EXPECTED[step]!)) return fail(`${step}: ${line.slice(0, 120)}`);
          mark(step);
          next[step]?.();
        }
      });
      socket.once('error', (err) => reject(err));
      socket.once('close', () => {
        if (index < order.length) return reject(new Error(`closed after ${order[index - 1] ?? 'connect'}`));
        mark('close');
        for (const [step, ms] of steps) this.times.get(step)!.push(ms);
        this.totals.push(performance.now() - started);
        resolve();
      });
    });
  }
}
