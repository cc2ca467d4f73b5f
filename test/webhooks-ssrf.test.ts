import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { mailboxWithAddress, sendMail } from './smtp-helpers.ts';
import { deliveries, drain, makeCert, Receiver, RECEIVER_HOST, setWebhook, type TestCert } from './webhook-receiver.ts';
import { classifyAddress } from '../src/net/ip-policy.ts';
import { safeFetch } from '../src/net/safe-fetch.ts';

// SSRF: a webhook URL must not reach inside the network. Every attempt below is refused before
// any connection is made (this machine never sends a packet to a private or foreign address in
// these tests). DNS names are answered by an injected resolver.

const BYPASSES = [
  'https://127.0.0.1/',
  'https://2130706433/', // decimal
  'https://0x7f000001/', // hex
  'https://0177.0.0.1/', // octal
  'https://127.1/', // short form
  'https://0/',
  'https://0.0.0.0/',
  'https://[::1]/',
  'https://[::]/',
  'https://[::ffff:127.0.0.1]/',
  'https://[::ffff:7f00:1]/',
  'https://[0:0:0:0:0:ffff:169.254.169.254]/',
  'https://[::127.0.0.1]/', // IPv4-compatible
  'https://10.0.0.1/',
  'https://172.16.5.4/',
  'https://192.168.1.1/',
  'https://100.64.0.1/', // CGNAT
  'https://169.254.169.254/latest/meta-data/',
  'https://[fd00:ec2::254]/', // AWS IPv6 metadata
  'https://[fe80::1]/',
  'https://[fc00::1]/',
  'https://224.0.0.1/',
  'https://255.255.255.255/',
  'https://240.0.0.1/',
  'https://198.18.0.1/',
  'https://192.0.0.170/',
  'https://[2002:7f00:1::]/', // 6to4 of 127.0.0.1
  'https://[2002:a9fe:a9fe::1]/', // 6to4 of 169.254.169.254
  'https://[64:ff9b::7f00:1]/', // NAT64 of 127.0.0.1
  'https://[64:ff9b::a9fe:a9fe]/', // NAT64 of 169.254.169.254
  'https://[2001::1]/', // Teredo
  'https://[ff02::1]/',
  'https://loopback.test/',
  'https://metadata.test/',
  'https://mixed.test/', // one public and one private address
  'https://mapped.test/',
  'https://private6.test/',
];

/**
 * The names an injected DNS knows; `flip.test` changes its answer when told. Each database suite
 * gets its own copy, so a flip made by one suite can never be seen by the next.
 */
function makeZone() {
  const zone: Record<string, string[]> = {
    'loopback.test': ['127.0.0.1'],
    'metadata.test': ['169.254.169.254'],
    'mixed.test': ['93.184.215.14', '10.1.2.3'],
    'mapped.test': ['::ffff:10.0.0.1'],
    'private6.test': ['fd12:3456::1'],
    'public.test': ['93.184.215.14'],
    'flip.test': ['93.184.215.14'],
  };
  async function dns(name: string, rrtype: string): Promise<unknown> {
    const hit = (zone[name.toLowerCase()] ?? []).filter((a) => (rrtype === 'AAAA' ? a.includes(':') : rrtype === 'A' && !a.includes(':')));
    if (!hit.length) throw Object.assign(new Error(`ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return hit;
  }
  return { zone, dns };
}

describe('address policy', () => {
  it.each(['8.8.8.8', '1.1.1.1', '93.184.215.14', '2606:4700:4700::1111', '::ffff:8.8.8.8', '64:ff9b::808:808', '2002:808:808::1'])('%s is public', (ip) => {
    expect(classifyAddress(ip)).toEqual({ public: true });
  });
  it.each(['127.0.0.1', '10.255.255.255', '172.31.0.1', '100.127.255.255', '169.254.0.1', '0.0.0.0', '255.255.255.255', '::1', '::', 'fe80::1%eth0', 'not-an-ip', '2001:db8::1', '3fff::1', '64:ff9b:1::1'])('%s is not', (ip) => {
    expect(classifyAddress(ip).public).toBe(false);
  });
});

for (const kind of DATABASES) {
  describe(`webhooks: SSRF bypass attempts are refused [${kind}]`, () => {
    let app: TestApp;
    const { zone, dns } = makeZone();
    beforeAll(async () => {
      app = await startTestApp(kind, {}, { resolver: dns });
    });
    afterAll(async () => {
      await app?.stop();
    });

    it.each(BYPASSES)('PUT %s → 422 INVALID_EMAIL_WEBHOOK', async (url) => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      const res = await app.request('PUT', `/v1/mailboxes/${box.id}/email/webhook`, { key: u.key, body: { webhook_url: url } });
      expect(res.status).toBe(422);
      expect(res.body.error.code).toBe('INVALID_EMAIL_WEBHOOK');
      expect(res.body.error.details.reason).toBe('blocked_address');
      // Bug: the message echoed what a name resolved to, mapping our internal DNS for the caller.
      if (new URL(url).hostname.endsWith('.test')) expect(res.text).not.toMatch(/127\.0\.0\.1|169\.254|10\.1\.2\.3|10\.0\.0\.1|fd12/);
    });

    it('a name that turns private after the webhook was set is refused at delivery, before connecting', async () => {
      const u = await app.user();
      const box = await mailboxWithAddress(app, u);
      expect((await app.request('PUT', `/v1/mailboxes/${box.id}/email/webhook`, { key: u.key, body: { webhook_url: 'https://public.test/hook' } })).status).toBe(200);
      await setWebhook(app, u.key, box.id, 'https://flip.test/hook');
      zone['flip.test'] = ['127.0.0.1'];
      await sendMail(app, { to: box.address });
      await drain(app);
      const [d] = await deliveries(app, u.key, box.id);
      expect(d).toMatchObject({ status: 'failed', attempt_count: 1, last_status_code: null, last_error: expect.stringContaining('loopback') });
    });
  });
}

describe('safeFetch', () => {
  let cert: TestCert;
  let receiver: Receiver;
  beforeAll(async () => {
    cert = await makeCert();
    receiver = new Receiver(cert);
    await receiver.start();
  });
  afterAll(async () => {
    await receiver.stop();
    fs.rmSync(cert.dir, { recursive: true, force: true });
  });

  it('resolves once and connects to the checked address, verifying the certificate for the name', async () => {
    const lookups: string[] = [];
    const resolver = async (host: string) => {
      lookups.push(host);
      return [{ address: '127.0.0.1', family: 4 as const }];
    };
    const res = await safeFetch(receiver.url('/pinned'), { body: '{}', resolver, allowPrivate: true, extraCa: [fs.readFileSync(cert.certFile, 'utf8')] });
    expect(res.status).toBe(204);
    expect(res.address).toBe('127.0.0.1');
    expect(lookups).toEqual([RECEIVER_HOST]);
    expect(receiver.received.at(-1)!.headers.host).toBe(`${RECEIVER_HOST}:${receiver.port}`);
    // Without the test CA the self-signed certificate is refused: verification is never off.
    await expect(safeFetch(receiver.url('/untrusted'), { body: '{}', resolver, allowPrivate: true })).rejects.toMatchObject({ kind: 'tls_failed' });
    // A private address without allowPrivate: refused, nothing sent.
    const before = receiver.received.length;
    await expect(safeFetch(receiver.url('/blocked'), { body: '{}', resolver, extraCa: [fs.readFileSync(cert.certFile, 'utf8')] })).rejects.toMatchObject({ kind: 'blocked_address' });
    expect(receiver.received.length).toBe(before);
  });
});
