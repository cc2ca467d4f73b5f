import { expect, it } from 'vitest';
import { once } from 'node:events';
import fs from 'node:fs';
import path from 'node:path';
import { describeEachDatabase, type TestApp } from './harness.ts';
import { mailboxWithAddress, smtpSession } from './smtp-helpers.ts';
import { until } from './ops-helpers.ts';
import { dataBudgetOf } from '../src/inbound/data-budget.ts';
import { fsStoreRoot } from './blob-helpers.ts';

// Bounds that only show with several sessions at once: the DATA bytes held in memory by all of
// them, and the monthly allowance when several messages pass RCPT before any is stored.

/** One SMTP connection driven step by step; replies as their last line. */
async function connect(app: TestApp) {
  const session = await smtpSession(app);
  const last = (r: string) => r.split('\r\n').pop()!;
  return {
    reply: async () => last(await session.reply()),
    send: async (line: string) => last(await session.send(line)),
    write: (data: string) => session.write(data),
    close: () => session.close(),
  };
}

/** Takes a session from EHLO (unless `again`: a second transaction) to DATA's 354 for `to`. */
async function toData(c: Awaited<ReturnType<typeof connect>>, to: string[], again = false): Promise<void> {
  if (!again) expect(await c.send('EHLO client.example')).toMatch(/^250 /);
  expect(await c.send('MAIL FROM:<a@example.com>')).toMatch(/^250 /);
  for (const address of to) expect(await c.send(`RCPT TO:<${address}>`)).toMatch(/^250 /);
  expect(await c.send('DATA')).toMatch(/^354 /);
}

/** A user's mailbox and two sessions to it, each waiting after DATA's 354 (close both when done). */
async function twoSessionsAtData(app: TestApp) {
  const box = await mailboxWithAddress(app, await app.user());
  const a = await connect(app);
  const b = await connect(app);
  try {
    for (const c of [a, b]) await toData(c, [box.address]);
  } catch (err) {
    a.close();
    b.close();
    throw err;
  }
  return { box, a, b };
}

function body(bytes: number, subject: string): string {
  const line = 'x'.repeat(76) + '\r\n';
  return `From: a@example.com\r\nTo: b@example.com\r\nSubject: ${subject}\r\n\r\n` + line.repeat(Math.ceil(bytes / line.length));
}

/** Resolves once the server holds at least `n` DATA bytes in memory. */
async function budgetReaches(app: TestApp, n: number): Promise<void> {
  const budget = dataBudgetOf(app.started.deps);
  while (budget.inUse < n) await once(budget, 'change');
}

describeEachDatabase(
  'SMTP bytes in flight',
  (app) => {
    it('answers 451 4.3.2 to DATA that would take the process over CUBBY_SMTP_MAX_DATA_IN_FLIGHT_BYTES, and accepts it again once memory is free', async () => {
      const { box, a, b } = await twoSessionsAtData(app());
      try {
        // A is in the middle of a 150 KB message: its bytes are held while it streams.
        a.write(body(150_000, 'first'));
        await budgetReaches(app(), 100_000);
        b.write(body(150_000, 'second') + '.\r\n');
        expect(await b.reply()).toMatch(/^451 4\.3\.2 /);
        a.write('.\r\n');
        expect(await a.reply()).toMatch(/^250 /);
        // Nothing is held once A is stored, and B's retry on the same connection is accepted.
        expect(dataBudgetOf(app().started.deps).inUse).toBe(0);
        await toData(b, [box.address], true);
        expect(await b.send(body(150_000, 'second') + '.')).toMatch(/^250 /);
        const subjects = await app().started.deps.db.selectFrom('emails').select('subject').where('mailbox_id', '=', box.id).orderBy('seq').execute();
        expect(subjects.map((s) => s.subject)).toEqual(['first', 'second']);
      } finally {
        a.close();
        b.close();
      }
    });
  },
  { CUBBY_SMTP_MAX_DATA_IN_FLIGHT_BYTES: '200000' },
);

describeEachDatabase('SMTP monthly allowance under concurrency', (app) => {
  const GiB = 1024 ** 3;
  const usageOf = async (scope: string) =>
    app().started.deps.db.selectFrom('received_usage').select(['count', 'bytes']).where('scope_id', '=', scope).where('period', '=', new Date().toISOString().slice(0, 7)).executeTakeFirstOrThrow();
  /** Opens a session up to DATA's 354 for these recipients, runs `meanwhile`, sends a 5,000-byte body and gives its reply. */
  async function sendAfter(to: string[], subject: string, meanwhile: () => Promise<unknown> = async () => undefined): Promise<string> {
    const c = await connect(app());
    try {
      await toData(c, to);
      await meanwhile();
      return await c.send(body(5_000, subject) + '.');
    } finally {
      c.close();
    }
  }

  it('refuses at the end of DATA a message whose size, declared nowhere, passes the byte allowance (552 5.2.2), and stores nothing', async () => {
    const user = await app().user(); // free plan: 2 GiB a month
    const box = await mailboxWithAddress(app(), user);
    const period = new Date().toISOString().slice(0, 7);
    await app().started.deps.db.insertInto('received_usage').values({ scope_id: user.accountId, period, count: 10, bytes: 2 * GiB - 1_000 }).execute();
    expect(await sendAfter([box.address], 'too big now')).toMatch(/^552 5\.2\.2 /);
    expect(await app().started.deps.db.selectFrom('emails').select('id').where('mailbox_id', '=', box.id).execute()).toHaveLength(0);
    expect(await usageOf(user.accountId)).toEqual({ count: 10, bytes: 2 * GiB - 1_000 });
  });

  it('refuses a message whose group used its byte allowance between RCPT and the end of DATA (the commit checks the totals it writes)', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const period = new Date().toISOString().slice(0, 7);
    await app().started.deps.db.insertInto('received_usage').values({ scope_id: user.accountId, period, count: 10, bytes: 2 * GiB - 100_000 }).execute();
    // Mail to the group's other mailboxes uses the rest meanwhile.
    const usedUp = () => app().started.deps.db.updateTable('received_usage').set({ count: 11, bytes: 2 * GiB - 1_000 }).where('scope_id', '=', user.accountId).where('period', '=', period).execute();
    expect(await sendAfter([box.address], 'over after RCPT', usedUp)).toMatch(/^552 5\.2\.2 /);
    expect(await app().started.deps.db.selectFrom('emails').select('id').where('mailbox_id', '=', box.id).execute()).toHaveLength(0);
    expect(await usageOf(user.accountId)).toEqual({ count: 11, bytes: 2 * GiB - 1_000 });
  });

  it('a message to two billing groups loses only the recipient whose group used its allowance between RCPT and the end of DATA', async () => {
    const full = await app().user();
    const fine = await app().user();
    const a = await mailboxWithAddress(app(), full);
    const b = await mailboxWithAddress(app(), fine);
    const period = new Date().toISOString().slice(0, 7);
    await app().started.deps.db.insertInto('received_usage').values({ scope_id: full.accountId, period, count: 10, bytes: 2 * GiB - 100_000 }).execute();
    const usedUp = () => app().started.deps.db.updateTable('received_usage').set({ count: 11, bytes: 2 * GiB - 1_000 }).where('scope_id', '=', full.accountId).where('period', '=', period).execute();
    const reply = await sendAfter([a.address, b.address], 'two groups', usedUp);
    expect(reply).toMatch(/^250 /);
    expect(await app().started.deps.db.selectFrom('emails').select('id').where('mailbox_id', '=', a.id).execute()).toHaveLength(0);
    expect(await app().started.deps.db.selectFrom('emails').select('id').where('mailbox_id', '=', b.id).execute()).toHaveLength(1);
    expect(await usageOf(full.accountId)).toEqual({ count: 11, bytes: 2 * GiB - 1_000 });
  });

  it('stores no more messages than the monthly count allows when several pass RCPT before any is stored (the rest get 452)', async () => {
    const user = await app().user(); // free plan: 2,000 a month
    const box = await mailboxWithAddress(app(), user);
    const period = new Date().toISOString().slice(0, 7);
    await app().started.deps.db.insertInto('received_usage').values({ scope_id: user.accountId, period, count: 1_998, bytes: 0 }).execute();
    const conns = await Promise.all([0, 1, 2, 3, 4].map(() => connect(app())));
    try {
      for (const c of conns) await toData(c, [box.address]);
      const replies = await Promise.all(conns.map((c, i) => c.send(body(200, `m${i}`) + '.')));
      expect(replies.filter((r) => /^250 /.test(r))).toHaveLength(2);
      expect(replies.filter((r) => /^452 4\.2\.2 /.test(r))).toHaveLength(3);
      const stored = await app().started.deps.db.selectFrom('emails').select('id').where('mailbox_id', '=', box.id).execute();
      expect(stored).toHaveLength(2);
      const usage = await app().started.deps.db.selectFrom('received_usage').select('count').where('scope_id', '=', user.accountId).where('period', '=', period).executeTakeFirstOrThrow();
      expect(Number(usage.count)).toBe(2_000);
    } finally {
      for (const c of conns) c.close();
    }
  });
});

describeEachDatabase(
  'SMTP messages past 1 MiB (written while DATA goes on)',
  (app) => {
    it('stores a large message whole, and leaves no temp file when DATA is refused while its bytes are being written', async () => {
      const tmp = path.join(fsStoreRoot(app().started.deps.blobs), 'tmp');
      const parts = () => (fs.existsSync(tmp) ? fs.readdirSync(tmp).filter((f) => f.endsWith('.part')) : []);
      const { box, a, b } = await twoSessionsAtData(app());
      try {
        // A holds 1 MB (under 1 MiB: kept in memory only). B's write to the store begins past 1 MiB,
        // and B is refused when both together pass the bound (2.5 MB): nothing of B is left.
        a.write(body(1_000_000, 'held'));
        await budgetReaches(app(), 900_000);
        expect(await b.send(body(2_000_000, 'too much') + '.')).toMatch(/^451 4\.3\.2 /);
        await until('the refused write to end', () => parts().length === 0);
        a.write('.\r\n');
        expect(await a.reply()).toMatch(/^250 /);
        // Past 1 MiB and within the bound: stored whole.
        const sent = body(1_200_000, 'large') + '.';
        await toData(b, [box.address], true);
        const reply = await b.send(sent);
        expect(reply).toMatch(/^250 /);
        const id = reply.match(/eml_[A-Za-z0-9]+/)![0];
        const row = await app().started.deps.db.selectFrom('emails').select(['subject', 'size_bytes']).where('id', '=', id).executeTakeFirstOrThrow();
        // What was sent, without the final dot.
        expect({ subject: row.subject, size: Number(row.size_bytes) }).toEqual({ subject: 'large', size: Buffer.byteLength(sent) - 1 });
        expect(parts()).toEqual([]);
      } finally {
        a.close();
        b.close();
      }
    });
  },
  { CUBBY_SMTP_MAX_DATA_IN_FLIGHT_BYTES: '2500000' },
);
