import { beforeAll, describe, expect, it } from 'vitest';
import {
  authenticateMessage, authFailureSignals, normalizeClientIp, senderAuthenticated, systemResolver, type AuthInput, type AuthSummary, type DnsResolver,
} from '../src/inbound/authenticate.ts';
import { screenMessage } from '../src/inbound/authenticate-input.ts';
import { ensureLinebreaksFast, headerScanFast, patchMailauthHeaderScan, patchMailauthLineBreaks } from '../src/inbound/mailauth-patches.ts';
import nodemailer from 'nodemailer';
import type { DNSResolver } from 'mailauth';
import { arcSealed, dkimSigned, fakeNameServer, message, rsaKey, tableResolver, txt, type Key, type Zone } from './inbound-authenticate-helpers.ts';

const MTA = 'mx.cubby.test';
let key: Key;
let arcKey: Key;
beforeAll(() => {
  key = rsaKey();
  arcKey = rsaKey();
});

const zone = (extra: Zone = {}): Zone => ({
  'example.com': { TXT: txt('v=spf1 ip4:192.0.2.10 ip6:2001:db8::/32 -all') },
  's1._domainkey.example.com': { TXT: key.record },
  '_dmarc.example.com': { TXT: txt('v=DMARC1; p=reject; rua=mailto:dmarc@example.com') },
  ...extra,
});

function run(over: Partial<AuthInput> & { zone?: Zone } = {}): Promise<AuthSummary> {
  const { zone: z, ...rest } = over;
  return authenticateMessage({
    raw: message(), clientIp: '192.0.2.10', helo: 'mail.example.com', mailFrom: 'bounce@example.com', mta: MTA,
    resolver: tableResolver(z ?? zone()), ...rest,
  });
}

describe('SPF', () => {
  it('passes for an address the envelope domain lists, fails for another', async () => {
    const pass = await run();
    expect(pass.spf).toEqual({ result: 'pass', domain: 'example.com', identity: 'mailfrom' });
    expect(pass.header).toMatch(/^mx\.cubby\.test;\r\n /);
    expect(pass.header).toContain('spf=pass');
    expect(senderAuthenticated(pass)).toBe(true);

    const fail = await run({ clientIp: '198.51.100.7' });
    expect(fail.spf.result).toBe('fail');
    expect(authFailureSignals(fail)).toContain('spf_fail');
    expect(senderAuthenticated(fail)).toBe(false);
  });

  it('softfails on ~all', async () => {
    const s = await run({ zone: zone({ 'example.com': { TXT: txt('v=spf1 ip4:192.0.2.10 ~all') } }), clientIp: '198.51.100.7' });
    expect(s.spf.result).toBe('softfail');
    expect(authFailureSignals(s)).toContain('spf_softfail');
    expect(authFailureSignals(s)).not.toContain('spf_fail');
  });

  it('follows include:', async () => {
    const z = zone({ 'example.com': { TXT: txt('v=spf1 include:_spf.mailer.test -all') }, '_spf.mailer.test': { TXT: txt('v=spf1 ip4:203.0.113.0/24 -all') } });
    expect((await run({ zone: z, clientIp: '203.0.113.45' })).spf.result).toBe('pass');
    expect((await run({ zone: z, clientIp: '192.0.2.10' })).spf.result).toBe('fail');
  });

  it('normalises IPv4-mapped IPv6 client addresses, and checks IPv6 ones', async () => {
    expect(normalizeClientIp('::ffff:192.0.2.10')).toBe('192.0.2.10');
    expect(normalizeClientIp('::FFFF:c000:020a')).toBe('192.0.2.10');
    expect(normalizeClientIp('[IPv6:2001:DB8::25]')).toBe('2001:db8::25');
    expect((await run({ clientIp: '::ffff:192.0.2.10' })).spf.result).toBe('pass');
    expect((await run({ clientIp: '::ffff:198.51.100.7' })).spf.result).toBe('fail');
    expect((await run({ clientIp: '2001:db8::25' })).spf.result).toBe('pass');
  });

  it('checks the HELO name for the null sender, which does not count as an authenticated sender', async () => {
    for (const mailFrom of ['', null, '<>']) {
      const resolver = tableResolver(zone({ 'mx.example.net': { TXT: txt('v=spf1 ip4:192.0.2.10 -all') } }));
      const s = await run({ mailFrom, helo: 'mx.example.net', resolver });
      expect(s.spf).toEqual({ result: 'pass', domain: 'mx.example.net', identity: 'helo' });
      expect(resolver.queries).toContain('mx.example.net TXT');
      expect(senderAuthenticated({ ...s, dmarc: { ...s.dmarc, result: 'fail' } })).toBe(false);
    }
  });

  it('applies the SPF lookup limit (permerror past it)', async () => {
    const z = zone({
      'example.com': { TXT: txt('v=spf1 include:a.mailer.test include:b.mailer.test include:c.mailer.test -all') },
      'a.mailer.test': { TXT: txt('v=spf1 -all') }, 'b.mailer.test': { TXT: txt('v=spf1 -all') }, 'c.mailer.test': { TXT: txt('v=spf1 ip4:192.0.2.10 -all') },
    });
    expect((await run({ zone: z })).spf.result).toBe('pass');
    expect((await run({ zone: z, limits: { spfMaxLookups: 2 } })).spf.result).toBe('permerror');
  });
});

describe('DKIM and DMARC', () => {
  const signer = () => [{ domain: 'example.com', selector: 's1', key }];

  it('passes a message signed by the From domain: DKIM aligned, DMARC pass with the published policy', async () => {
    // The envelope is a third party's whose SPF fails: DMARC passes on DKIM alone.
    const s = await run({ raw: await dkimSigned(message(), signer()), mailFrom: 'bounce@esp.test', zone: zone({ 'esp.test': { TXT: txt('v=spf1 -all') } }) });
    expect(s.dkim).toEqual([{ result: 'pass', domain: 'example.com', selector: 's1', aligned: true }]);
    expect(s.dmarc).toEqual({ result: 'pass', policy: 'reject', domain: 'example.com' });
    expect(s.spf.result).toBe('fail');
    expect(senderAuthenticated(s)).toBe(true);
    expect(s.header).toContain('dkim=pass');
    expect(s.header).toContain('dmarc=pass');
  });

  it('fails DKIM when the body was changed after signing; DMARC then fails and reports p=reject', async () => {
    const signed = await dkimSigned(message(), signer());
    const tampered = Buffer.from(signed.toString('latin1').replace('the figures are attached', 'wire the money today'), 'latin1');
    const s = await run({ raw: tampered, mailFrom: 'bounce@esp.test' });
    expect(s.dkim).toEqual([{ result: 'fail', domain: 'example.com', selector: 's1', aligned: true }]);
    expect(s.dmarc).toEqual({ result: 'fail', policy: 'reject', domain: 'example.com' });
    expect(s.header).toContain('dkim=fail (body hash did not verify)');
    expect(authFailureSignals(s)).toEqual(expect.arrayContaining(['dkim_fail', 'dmarc_fail', 'dmarc_reject']));
  });

  it('fails DMARC for a signature of another domain (not aligned)', async () => {
    const z = zone({ 's2._domainkey.esp.test': { TXT: key.record } });
    const raw = await dkimSigned(message(), [{ domain: 'esp.test', selector: 's2', key }]);
    const s = await run({ raw, zone: z, clientIp: '198.51.100.7' });
    expect(s.dkim).toEqual([{ result: 'pass', domain: 'esp.test', selector: 's2', aligned: false }]);
    expect(s.dmarc).toEqual({ result: 'fail', policy: 'reject', domain: 'example.com' });
  });

  it('passes DMARC on SPF alignment (relaxed: a subdomain envelope)', async () => {
    const z = zone({ 'bounces.example.com': { TXT: txt('v=spf1 ip4:192.0.2.10 -all') } });
    const s = await run({ zone: z, mailFrom: 'b-123@bounces.example.com' });
    expect(s.spf.result).toBe('pass');
    expect(s.dkim).toEqual([]);
    expect(s.dmarc.result).toBe('pass');
  });

  it('says none for everything when the domains publish nothing', async () => {
    const s = await run({ zone: {} });
    expect(s).toMatchObject({ spf: { result: 'none' }, dkim: [], dmarc: { result: 'none', policy: null, domain: 'example.com' }, arc: { result: 'none' } });
    expect(authFailureSignals(s)).toEqual([]);
    expect(senderAuthenticated(s)).toBe(false);
    expect(s.header).toMatch(/dkim=none[\s\S]*spf=none[\s\S]*dmarc=none/);
  });

  it('verifies at most maxSignatures DKIM signatures', async () => {
    const signers = Array.from({ length: 12 }, () => ({ domain: 'example.com', selector: 's1', key }));
    const s = await run({ raw: await dkimSigned(message(), signers) });
    expect(s.dkim).toHaveLength(10);
    expect(s.dkim.filter((d) => d.result !== 'pass'), JSON.stringify(s.dkim)).toEqual([]);
  });

  it('skips DKIM for a header section over maxHeaderBytes, still checking SPF and DMARC', async () => {
    // 1 MB of header after From (unsigned filler: without the cap the signature would still verify).
    const filler = 'X-Filler: 0123456789abcdef\r\n'.repeat(40_000);
    const raw = Buffer.from((await dkimSigned(message(), signer())).toString('latin1').replace('\r\n\r\n', `\r\n${filler}\r\n`), 'latin1');
    expect((await run({ raw, limits: { maxHeaderBytes: 2e6 } })).dkim[0].result).toBe('pass');
    const s = await run({ raw, clientIp: '198.51.100.7' });
    expect(s.dkim).toEqual([]);
    expect(s.spf.result).toBe('fail');
    expect(s.dmarc.result).toBe('fail');
  });

  it('verifies a 20 MB signed message', async () => {
    const raw = await dkimSigned(message({ body: 'The quick brown fox jumps over the lazy dog.\r\n'.repeat(450_000) }), signer());
    expect(raw.length).toBeGreaterThan(20e6);
    expect((await run({ raw })).dkim[0].result).toBe('pass');
  });
});

describe('ARC', () => {
  const arcZone = () => zone({ 'arc._domainkey.forwarder.test': { TXT: arcKey.record } });

  it('passes a message sealed by a forwarder', async () => {
    const raw = await arcSealed(await dkimSigned(message(), [{ domain: 'example.com', selector: 's1', key }]), 'forwarder.test', 'arc', arcKey);
    const s = await run({ raw, zone: arcZone() });
    expect(s.arc.result).toBe('pass');
    expect(s.header).toContain('arc=pass');
  });

  it('fails when the sealed body was changed, and is temperror when the seal key cannot be looked up', async () => {
    const sealed = await arcSealed(message(), 'forwarder.test', 'arc', arcKey);
    const tampered = Buffer.from(sealed.toString('latin1').replace('figures', 'invoices'), 'latin1');
    const failed = await run({ raw: tampered, zone: arcZone() });
    expect(failed.arc.result).toBe('fail');
    expect(authFailureSignals(failed)).toContain('arc_fail');

    const table = tableResolver(arcZone());
    const flaky: DnsResolver = (name, type) => (name.startsWith('arc._domainkey') ? Promise.reject(new Error('SERVFAIL')) : table(name, type));
    expect((await run({ raw: sealed, resolver: flaky })).arc.result).toBe('temperror');
  });

  it('is none for an unsealed message', async () => {
    expect((await run()).arc.result).toBe('none');
  });
});

describe('DNS failures and time limits', () => {
  const signed = () => dkimSigned(message(), [{ domain: 'example.com', selector: 's1', key }]);

  it('turns a resolver that throws or times out into temperror, without throwing', async () => {
    const throwing: DnsResolver = () => { throw new Error('resolver broke'); };
    const timingOut: DnsResolver = async () => { throw Object.assign(new Error('timeout'), { code: 'ETIMEOUT' }); };
    for (const resolver of [throwing, timingOut]) {
      const s = await run({ raw: await signed(), resolver });
      expect(s.spf.result).toBe('temperror');
      expect(s.dkim).toEqual([{ result: 'temperror', domain: 'example.com', selector: 's1', aligned: true }]);
      expect(s.dmarc.result).toBe('temperror');
      expect(senderAuthenticated(s)).toBe(false);
    }
  });

  it('returns when the resolver never answers: unfinished checks are temperror', async () => {
    const s = await run({ raw: await signed(), resolver: () => new Promise(() => {}), timeoutMs: 300 });
    expect(s.spf.result).toBe('temperror');
    expect(s.dkim.map((d) => d.result)).toEqual(['temperror']);
    expect(s.dmarc.result).toBe('temperror');
    expect(s.header).toContain('spf=temperror');
  });

  it('gives up on a message it cannot finish in time', async () => {
    // Signed (the signature need not be good): its body has to be read, 20 MB of it.
    const raw = message({ body: 'x'.repeat(20e6), extraHeaders: 'DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.com; s=s1; h=from; bh=AAAA; b=AAAA\r\n' });
    const s = await run({ raw, timeoutMs: 1 });
    expect(s).toMatchObject({ spf: { result: 'temperror', domain: 'example.com' }, dmarc: { result: 'temperror' }, arc: { result: 'temperror' } });
    expect(s.header).toContain('(timed out)');
  });

  it('caps the DNS lookups of one message', async () => {
    const s = await run({ raw: await signed(), limits: { maxLookups: 1 } });
    // The DKIM key lookup came first and used the only one.
    expect(s.dkim[0].result).toBe('pass');
    expect(s.spf.result).toBe('temperror');
  });
});

describe('what mailauth is given', () => {
  const limits = { maxSignatures: 10, maxHeaderBytes: 1e6 };
  const headerOf = (raw: Buffer) => raw.subarray(0, raw.indexOf('\r\n\r\n') + 4);

  it('an unsigned message: its header section only (the body cannot change a result), even with a signature field in the body', () => {
    const raw = message({ body: 'DKIM-Signature: v=1; d=example.com\r\nARC-Seal: i=1\r\n' + 'x'.repeat(100_000) });
    expect(screenMessage(raw, limits).pieces).toEqual([headerOf(raw)]);
  });

  it('a message with a DKIM-Signature or any ARC field, whatever its case and spacing: the whole message', () => {
    for (const field of ['DKIM-Signature: v=1', 'dkim-signature : v=1', 'ARC-Seal: i=1', 'ARC-Message-Signature: i=1', 'arc-authentication-results: i=1']) {
      const raw = message({ extraHeaders: `X-Before: 1\r\n${field}\r\n`, body: 'body\r\n' });
      expect(Buffer.concat(screenMessage(raw, limits).pieces), field).toEqual(raw);
    }
  });

  it('a message whose header section never ends: unchanged (no body to leave out)', () => {
    const raw = Buffer.from('From: a@example.com\r\nSubject: no blank line\r\n');
    expect(Buffer.concat(screenMessage(raw, limits).pieces)).toEqual(raw);
  });

  it("an unsigned message, given its header section only, gets the results mailauth gives the whole message", async () => {
    const { authenticate } = await import('mailauth');
    const bodies = ['line with a bare LF\n'.repeat(50_000), 'DKIM-Signature: v=1; d=example.com; s=s1; h=from; bh=AAAA; b=AAAA\r\n\r\ntext\r\n', ''];
    for (const [i, body] of bodies.entries()) {
      for (const clientIp of ['192.0.2.10', '198.51.100.7']) {
        const raw = message({ body });
        const ours = await run({ raw, clientIp });
        const whole = await authenticate(raw, { ip: clientIp, helo: 'mail.example.com', sender: 'bounce@example.com', mta: MTA, resolver: tableResolver(zone()) as DNSResolver });
        const verdicts = { spf: ours.spf.result, dkim: ours.dkim.map((d) => d.result), dmarc: ours.dmarc.result, arc: ours.arc.result };
        expect(verdicts, `body ${i}, ${clientIp}`).toEqual({
          spf: whole.spf && whole.spf.status.result,
          // Ours lists signatures only; mailauth reports a lone `none` when there is none.
          dkim: whole.dkim.results.map((d) => d.status.result).filter((r) => r !== 'none'),
          dmarc: whole.dmarc && whole.dmarc.status.result,
          arc: whole.arc && whole.arc.status.result,
        });
        // And the results differ where they should: the client's address decides SPF, and with it DMARC.
        expect(verdicts.spf).toBe(clientIp === '192.0.2.10' ? 'pass' : 'fail');
      }
    }
  });
});

describe("mailauth's line-break scan", () => {
  // mailauth's rule, as a reference: an LF is turned into CRLF unless the last byte before it that
  // is not an LF (in this chunk or an earlier one) is a CR.
  function* reference(this: { lastByte?: number }, input: Buffer): Generator<Buffer> {
    let pos = 0;
    for (let i = 0; i < input.length; i++) {
      if (input[i] !== 0x0a) this.lastByte = input[i];
      else if (this.lastByte !== 0x0d) {
        yield i === 0 || pos === i ? Buffer.from('\r\n') : Buffer.concat([input.subarray(pos, i), Buffer.from('\r\n')]);
        pos = i + 1;
      }
    }
    if (pos === 0) yield input;
    else if (pos < input.length) yield input.subarray(pos);
  }

  it('is patched, and yields what the rule yields for random chunks of CR, LF and text', () => {
    expect(patchMailauthLineBreaks()).toBe('patched');
    let seed = 11;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    for (let round = 0; round < 2_000; round++) {
      const chunks = Array.from({ length: 1 + rnd(4) }, () => Buffer.from(Array.from({ length: rnd(12) }, () => [0x0a, 0x0d, 0x61][rnd(3)]!)));
      const a: { lastByte?: number } = {};
      const b: { lastByte?: number } = {};
      const want = chunks.map((c) => [...reference.call(a, c)].map((x) => x.toString('latin1')).join('|') + `#${a.lastByte}`);
      const got = chunks.map((c) => [...ensureLinebreaksFast.call(b, c)].map((x) => x.toString('latin1')).join('|') + `#${b.lastByte}`);
      expect(got, JSON.stringify(chunks.map((c) => c.toString('latin1')))).toEqual(want);
    }
  });

  it('verifies a message with bare line feeds signed by another implementation (nodemailer, as Cubby sends)', async () => {
    patchMailauthLineBreaks();
    const raw = message({ body: 'first line\nsecond  line \r\n\nthird\r\r\nlast\n' });
    const transport = nodemailer.createTransport({ streamTransport: true, buffer: true });
    const sent = await transport.sendMail({ envelope: { from: 'bounce@example.com', to: ['box-ab12@cubby.test'] }, raw, dkim: { domainName: 'example.com', keySelector: 's1', privateKey: key.privateKey } });
    const signed = sent.message as Buffer;
    expect((await run({ raw: signed })).dkim.map((d) => d.result)).toEqual(['pass']);
    const tampered = Buffer.from(signed.toString('latin1').replace('third', 'THIRD'), 'latin1');
    expect((await run({ raw: tampered })).dkim.map((d) => d.result)).toEqual(['fail']);
  });
});

describe("mailauth's header scan", () => {
  // mailauth's rule, as a reference: the header section ends at an LF whose byte before is an LF,
  // or a CR with an LF before it, counting the bytes of earlier chunks.
  type Scanner = { state: string; stateBytes: number[]; headerChunks: Buffer[]; headers: unknown; log: string[] };
  const parseHeaders = (buf: Buffer) => ({ raw: buf.toString('latin1') });
  async function reference(this: Scanner, chunk: Buffer): Promise<void> {
    if (!chunk.length) return;
    if (this.state === 'header') {
      for (let i = 0; i < chunk.length; i++) {
        this.stateBytes.push(chunk[i]!);
        if (this.stateBytes.length > 4) this.stateBytes = this.stateBytes.slice(-4);
        const [b2, b1, b0] = [this.stateBytes.at(-3), this.stateBytes.at(-2), this.stateBytes.at(-1)];
        if (b0 === 0x0a && (b1 === 0x0a || (b1 === 0x0d && b2 === 0x0a))) {
          this.state = 'body';
          this.headerChunks.push(chunk.subarray(0, i + 1));
          this.log.push(JSON.stringify(parseHeaders(Buffer.concat(this.headerChunks))));
          if (i === chunk.length - 1) return;
          chunk = chunk.subarray(i + 1);
          break;
        }
      }
    }
    if (this.state !== 'body') {
      this.headerChunks.push(chunk);
      return;
    }
    this.log.push(`body:${chunk.toString('latin1')}`);
  }
  const scanner = (): Scanner & { messageHeaders(h: unknown): Promise<void>; nextChunk(c: Buffer): Promise<void> } => {
    const self = {
      state: 'header', stateBytes: [] as number[], headerChunks: [] as Buffer[], headers: false as unknown, log: [] as string[],
      messageHeaders: async (h: unknown) => void self.log.push(JSON.stringify(h)),
      nextChunk: async (c: Buffer) => void self.log.push(`body:${c.toString('latin1')}`),
    };
    return self;
  };

  it('is patched, and finds the same end, headers, body and state for random chunks', async () => {
    expect(await patchMailauthHeaderScan()).toBe('patched');
    const fast = headerScanFast(parseHeaders);
    let seed = 5;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    for (let round = 0; round < 2_000; round++) {
      const chunks = Array.from({ length: 1 + rnd(5) }, () => Buffer.from(Array.from({ length: rnd(7) }, () => [0x0a, 0x0d, 0x61, 0x3a][rnd(4)]!)));
      const a = scanner();
      const b = scanner();
      for (const c of chunks) {
        await reference.call(a, c);
        await fast.call(b, c);
        a.log.push(`|${a.state}${a.stateBytes.join(',')}`);
        b.log.push(`|${b.state}${b.stateBytes.join(',')}`);
      }
      expect(b.log, JSON.stringify(chunks.map((c) => c.toString('latin1')))).toEqual(a.log);
    }
  });

  it('still reads a signed message whose header section ends across chunks', async () => {
    await patchMailauthHeaderScan();
    const filler = 'Received: from relay.example.net by mx.example.com; Mon, 05 Jan 2026 10:00:00 +0000\r\n'.repeat(800);
    const raw = await dkimSigned(message({ extraHeaders: filler }), [{ domain: 'example.com', selector: 's1', key }]);
    expect(raw.indexOf('\r\n\r\n')).toBeGreaterThan(64 * 1024); // past the first 64 KiB slice
    expect((await run({ raw })).dkim.map((d) => d.result)).toEqual(['pass']);
  });
});

describe('helpers', () => {
  it('read stored summaries (JSON without the header) and tolerate null', async () => {
    const { header: _h, ...stored } = await run();
    expect(senderAuthenticated(JSON.parse(JSON.stringify(stored)))).toBe(true);
    expect(senderAuthenticated(null)).toBe(false);
    expect(authFailureSignals(null)).toEqual([]);
  });
});

describe('systemResolver', () => {
  it('asks the configured name server, maps NXDOMAIN to ENOTFOUND and times out a silent one', async () => {
    const server = await fakeNameServer((name) => (name === 'example.com' ? ['v=spf1 ip4:192.0.2.10 -all'] : name.startsWith('silent') ? 'silent' : null));
    try {
      const resolve = systemResolver(300, [server.address]);
      expect(await resolve('example.com', 'TXT')).toEqual([['v=spf1 ip4:192.0.2.10 -all']]);
      await expect(resolve('nothing.example.com', 'TXT')).rejects.toMatchObject({ code: 'ENOTFOUND' });
      await expect(resolve('silent.example.com', 'TXT')).rejects.toMatchObject({ code: 'ETIMEOUT' });
      const s = await run({ resolver: resolve, clientIp: '198.51.100.7' });
      expect(s.spf).toEqual({ result: 'fail', domain: 'example.com', identity: 'mailfrom' });
    } finally {
      await server.close();
    }
  });
});
