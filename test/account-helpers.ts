import PostalMime from 'postal-mime';
import { afterAll, beforeAll, describe } from 'vitest';
import { DATABASES, type TestApp } from './harness.ts';
import { startClockApp, testClock, type Clock } from './agent-helpers.ts';
import { startSink, type Sink } from './outbound-helpers.ts';
import { WebClient } from './web-client.ts';

// Account tests: an app on a movable clock whose own mail (verification, invitations, password
// resets) goes to a recording SMTP relay, so tests read links from the messages people get.

export interface AccountsEnv {
  app: TestApp;
  sink: Sink;
  clock: Clock;
}

export function describeAccounts(name: string, body: (env: () => AccountsEnv) => void, env: Record<string, string> = {}) {
  for (const kind of DATABASES) {
    describe(`${name} [${kind}]`, () => {
      let current: AccountsEnv | undefined;
      beforeAll(async () => {
        const sink = await startSink();
        const clock = testClock();
        const app = await startClockApp(kind, clock, { CUBBY_SMTP_RELAY_URL: sink.url, CUBBY_SIGNUP: 'invite', ...env });
        current = { app, sink, clock };
      });
      afterAll(async () => {
        await current?.app.stop();
        await current?.sink.close();
      });
      body(() => current!);
    });
  }
}

/** The text of the newest message to `address` whose subject matches, waiting for it to arrive. */
export async function mailTo(sink: Sink, address: string, subject: RegExp, after = 0): Promise<{ subject: string; text: string }> {
  for (;;) {
    const hits = sink.messages.slice(after).filter((m) => m.rcptTo.includes(address.toLowerCase()));
    for (const m of hits.reverse()) {
      const parsed = await PostalMime.parse(m.raw);
      if (subject.test(parsed.subject ?? '')) return { subject: parsed.subject ?? '', text: parsed.text ?? '' };
    }
    await sink.waitFor(sink.messages.length + 1);
  }
}

/** The first link in a message that starts with the app's base and contains `path`. */
export function linkIn(text: string, app: TestApp, path: string): string {
  const m = text.match(new RegExp(`${app.base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}${path}[^\\s]*`));
  if (!m) throw new Error(`no ${path} link in: ${text}`);
  return m[0].slice(app.base.length);
}

export async function webSignIn(app: TestApp, email: string, password = 'a long test password'): Promise<WebClient> {
  const web = new WebClient(app.base);
  const r = await web.signIn(email, password);
  if (r.status !== 303) throw new Error(`sign-in failed: ${r.status} ${r.text.slice(0, 300)}`);
  return web;
}
