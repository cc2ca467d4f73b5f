import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { analyzeMessage, type AnalyzeInput } from '../src/inbound/analyze.ts';
import { AnalyzePool } from '../src/inbound/analyze-pool.ts';
import { cachingResolver, type CachingResolver } from '../src/inbound/dns-cache.ts';
import { describeEachDatabase } from './harness.ts';
import { dkimSigned, message, rsaKey, tableResolver, txt } from './inbound-authenticate-helpers.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';

// Parsing and sender authentication of received mail on worker threads (src/inbound/analyze-pool.ts):
// the same result as on the event loop, DNS answered by the main thread's resolver, a lost thread
// failing nothing, and the SMTP path storing what the thread found.

const FIXTURES = path.join(import.meta.dirname, 'fixtures', 'eml');
const key = rsaKey();
const zone = () =>
  tableResolver({
    'esp.test': { TXT: txt('v=spf1 ip4:127.0.0.1 -all') },
    'sel._domainkey.example.com': { TXT: key.record },
    '_dmarc.example.com': { TXT: txt('v=DMARC1; p=reject') },
  });
const input = (over: Partial<AnalyzeInput> = {}): AnalyzeInput => ({
  deliveredTo: ['box-ab12@cubby.test', 'other-cd34@cubby.test'], receivedAt: new Date('2026-03-15T10:00:00Z'), clientIp: '127.0.0.1', helo: 'mail.esp.test', mailFrom: 'bounce@esp.test', mta: 'mx.cubby.test', inlineMaxBytes: 65536, ...over,
});
const log = { warn: () => undefined };

describe('analysis threads', () => {
  const pools: AnalyzePool[] = [];
  afterAll(async () => {
    await Promise.all(pools.map((p) => p.close()));
  });
  const pool = (threads: number, extra: Partial<ConstructorParameters<typeof AnalyzePool>[2]> = {}) => {
    const counts = { thread: 0, event_loop: 0 };
    const p = new AnalyzePool(zone(), threads, { log, counted: (on) => counts[on]++, ...extra });
    pools.push(p);
    return { p, counts };
  };

  it('give what the event loop gives for real and broken messages, attachments and message.json bytes included', async () => {
    const { p, counts } = pool(1);
    const files = ['legacy', 'thirdparty', 'malformed', 'rfc'].flatMap((dir) => {
      const d = path.join(FIXTURES, dir);
      return fs.readdirSync(d).filter((f) => f.endsWith('.eml')).slice(0, 12).map((f) => path.join(d, f));
    });
    expect(files.length).toBeGreaterThan(20);
    let attachments = 0;
    for (const file of files) {
      const bytes = fs.readFileSync(file);
      const [threaded, inline] = await Promise.all([p.analyze(bytes, input()), analyzeMessage(bytes, input(), zone())]);
      expect(threaded, file).toEqual(inline);
      for (const a of threaded.parsed.attachments) expect(Buffer.isBuffer(a.content)).toBe(true);
      expect(threaded.jsonBytes.every((b) => Buffer.isBuffer(b))).toBe(true);
      attachments += threaded.parsed.attachments.length;
    }
    expect(attachments).toBeGreaterThan(0);
    expect(counts).toEqual({ thread: files.length, event_loop: 0 });
  });

  it('ask the main thread’s resolver for DNS: SPF, DKIM and DMARC pass through a thread', async () => {
    const resolver = zone();
    const p = new AnalyzePool(resolver, 1, { log });
    pools.push(p);
    const signed = await dkimSigned(message(), [{ domain: 'example.com', selector: 'sel', key }]);
    const a = await p.analyze(signed, input());
    expect(a.auth?.spf.result).toBe('pass');
    expect(a.auth?.dkim.map((d) => [d.result, d.domain])).toEqual([['pass', 'example.com']]);
    expect(a.auth?.dmarc.result).toBe('pass');
    expect(resolver.queries).toEqual(expect.arrayContaining(['esp.test TXT', 'sel._domainkey.example.com TXT']));
    // "No record" keeps its meaning across the thread: an unknown sender domain is spf=none, not an error.
    const none = await p.analyze(message(), input({ mailFrom: 'someone@nowhere.test' }));
    expect(none.auth?.spf.result).toBe('none');
  });

  it('keep a caching resolver’s answers on the thread until they expire, and ask again after', async () => {
    // Counts the questions that reach the main thread's caching resolver.
    const counting = (resolver: CachingResolver) => {
      const c = Object.assign((name: string, rrtype: string) => resolver(name, rrtype), {
        asked: 0,
        withExpiry: (name: string, rrtype: string) => {
          c.asked++;
          return resolver.withExpiry(name, rrtype);
        },
      });
      return c;
    };
    const kept = counting(cachingResolver(zone(), { ttlMs: 60_000 }));
    const p = new AnalyzePool(kept, 1, { log });
    pools.push(p);
    const signed = await dkimSigned(message(), [{ domain: 'example.com', selector: 'sel', key }]);
    const first = await p.analyze(signed, input());
    expect([first.auth?.spf.result, first.auth?.dkim[0]?.result, first.auth?.dmarc.result]).toEqual(['pass', 'pass', 'pass']);
    const askedForOne = kept.asked;
    expect(askedForOne).toBeGreaterThanOrEqual(3);
    // The same sender again: answered on the thread, with the same results.
    for (let i = 0; i < 3; i++) expect(await p.analyze(signed, input())).toEqual(first);
    expect(kept.asked).toBe(askedForOne);
    // "No record" is kept too.
    const unknown = await p.analyze(message(), input({ mailFrom: 'someone@nowhere.test' }));
    expect(unknown.auth?.spf.result).toBe('none');
    const askedWithUnknown = kept.asked;
    expect(await p.analyze(message(), input({ mailFrom: 'someone@nowhere.test' }))).toEqual(unknown);
    expect(kept.asked).toBe(askedWithUnknown);

    // Answers that may not be kept (expired at once, or a server failure) are asked for every message.
    for (const resolver of [
      cachingResolver(zone(), { ttlMs: 0 }),
      cachingResolver(async (name: string) => {
        throw Object.assign(new Error(`timed out ${name}`), { code: 'ETIMEOUT' });
      }),
    ]) {
      const r = counting(resolver);
      const pr = new AnalyzePool(r, 1, { log });
      pools.push(pr);
      const a = await pr.analyze(signed, input());
      const once = r.asked;
      expect(once).toBeGreaterThan(0);
      expect(await pr.analyze(signed, input())).toEqual(a);
      expect(r.asked).toBe(2 * once);
    }
  });

  it('bring DNS failures across as failures (temperror), also from a resolver that throws at once', async () => {
    const failing = async (name: string) => {
      throw Object.assign(new Error(`timed out ${name}`), { code: 'ETIMEOUT' });
    };
    const throwsAtOnce = ((name: string) => {
      throw Object.assign(new Error(`broken ${name}`), { code: 'ESERVFAIL' });
    }) as unknown as typeof failing;
    for (const resolver of [failing, throwsAtOnce]) {
      const p = new AnalyzePool(resolver, 1, { log });
      pools.push(p);
      const a = await p.analyze(message(), input());
      expect(a.auth?.spf.result).toBe('temperror');
      expect(a).toEqual(await analyzeMessage(message(), input(), resolver));
    }
  });

  it('give up on a thread that does not answer in time and analyze on the event loop', async () => {
    const { p, counts } = pool(1, { workerModule: new URL('./fixtures/analysis/hanging-worker.ts', import.meta.url), jobTimeoutMs: 300 });
    const bytes = fs.readFileSync(path.join(FIXTURES, 'legacy', '000.eml'));
    expect(await p.analyze(bytes, input())).toEqual(await analyzeMessage(bytes, input(), zone()));
    expect(counts).toEqual({ thread: 0, event_loop: 1 });
  });

  it('analyze on the event loop when a thread dies, and fail no message', async () => {
    const warned: unknown[] = [];
    const dying = new URL('./fixtures/analysis/dying-worker.ts', import.meta.url);
    const bytes = fs.readFileSync(path.join(FIXTURES, 'legacy', '000.eml'));
    const expected = await analyzeMessage(bytes, input(), zone());
    const { p, counts } = pool(1, { workerModule: dying, restartDelayMs: 0, log: { warn: (o) => void warned.push(o) } });
    expect(await p.analyze(bytes, input())).toEqual(expected);
    expect(await p.analyze(bytes, input())).toEqual(expected); // a new thread, which dies too
    expect(counts).toEqual({ thread: 0, event_loop: 2 });
    expect(warned.length).toBe(2);
    // With a restart delay, a thread that keeps dying is not started again for every message.
    const slow = pool(1, { workerModule: dying, restartDelayMs: 60_000, log: { warn: (o) => void warned.push(o) } });
    for (let i = 0; i < 3; i++) expect(await slow.p.analyze(bytes, input())).toEqual(expected);
    expect(slow.counts).toEqual({ thread: 0, event_loop: 3 });
    expect(warned.length).toBe(3);
  });

  it('run on the event loop with 0 threads', async () => {
    const { p, counts } = pool(0);
    await p.analyze(message(), input());
    expect(counts).toEqual({ thread: 0, event_loop: 1 });
  });
});

describeEachDatabase('received mail through an analysis thread', (app) => {
  it('stores what the thread found (authentication results, attachment) and counts it', async () => {
    const user = await app().user();
    const box = await mailboxWithAddress(app(), user);
    const raw = await dkimSigned(
      Buffer.from(
        `From: Alice <alice@example.com>\r\nTo: ${box.address}\r\nSubject: Figures\r\nDate: Mon, 05 Jan 2026 10:00:00 +0000\r\nMessage-ID: <t1@example.com>\r\n` +
          `MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nSee attached.\r\n` +
          `--b\r\nContent-Type: text/csv; name=figures.csv\r\nContent-Disposition: attachment; filename=figures.csv\r\n\r\nq,amount\r\n1,42\r\n--b--\r\n`,
      ),
      [{ domain: 'example.com', selector: 'sel', key }],
    );
    const sent = await sendMail(app(), { from: 'bounce@esp.test', to: box.address, raw });
    expect(sent.emailIds).toHaveLength(1);
    const row = await app().started.deps.db.selectFrom('emails').select(['auth_results', 'attachment_count', 'subject']).where('id', '=', sent.emailIds[0]!).executeTakeFirstOrThrow();
    const auth = JSON.parse(row.auth_results!);
    expect([auth.spf.result, auth.dkim[0].result, auth.dmarc.result]).toEqual(['pass', 'pass', 'pass']);
    expect([row.subject, row.attachment_count]).toEqual(['Figures', 1]);
    const metrics = await app().request('GET', '/metrics');
    expect(metrics.text).toMatch(/cubby_smtp_analyses_total\{on="thread"\} [1-9]/);
    expect(metrics.text).not.toMatch(/cubby_smtp_analyses_total\{on="event_loop"\}/);
  });
}, { CUBBY_SMTP_ANALYSIS_THREADS: '1' }, { appOptions: { resolver: zone() } });
