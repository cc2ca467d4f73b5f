import tls from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DATABASES, startTestApp, type TestApp } from './harness.ts';
import { startTestZone, type TestZone } from './dns-zone.ts';
import { HAVE_PEBBLE, freePort, startPebble, type Pebble } from './acme-pebble.ts';
import { newBucket, publishAndWait, publisher, siteFetch, uploadFolder } from './sites-helpers.ts';

// Certificates for custom domains from a real ACME server (Pebble) with HTTP-01: Pebble resolves
// the domain through the test's name server, fetches the challenge from the sites server's HTTP
// port, and issues; the sites server then answers TLS for that name (SNI) with the certificate.

let serial = 0;

function httpsGet(port: number, servername: string, ca: string): Promise<{ status: number; body: string; cert: tls.PeerCertificate }> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, servername, ca }, () => {
      const cert = socket.getPeerCertificate();
      socket.write(`GET / HTTP/1.1\r\nHost: ${servername}\r\nConnection: close\r\n\r\n`);
      let raw = '';
      socket.on('data', (c) => (raw += c));
      socket.on('end', () => resolve({ status: Number(raw.split(' ')[1]), body: raw.split('\r\n\r\n').slice(1).join('\r\n\r\n'), cert }));
    });
    socket.on('error', reject);
  });
}

describe.skipIf(!HAVE_PEBBLE)('ACME certificates for custom site domains (Pebble)', () => {
  for (const kind of DATABASES) {
    describe(`[${kind}]`, () => {
      let zone: TestZone;
      let pebble: Pebble;
      let app: TestApp;
      let sitesPort: number;
      let tlsPort: number;
      beforeAll(async () => {
        zone = await startTestZone();
        [sitesPort, tlsPort] = [await freePort(), await freePort()];
        pebble = await startPebble({ dnsServer: zone.server, httpPort: sitesPort });
        app = await startTestApp(
          kind,
          { CUBBY_SITES_PORT: String(sitesPort), CUBBY_SITES_TLS_PORT: String(tlsPort), CUBBY_SITES_ADDRESSES: '127.0.0.1', CUBBY_ACME_DIRECTORY: pebble.directoryUrl, CUBBY_ACME_CA_FILE: pebble.caFile, CUBBY_ACME_EMAIL: 'ops@example.org' },
          { resolver: zone.resolver },
        );
      }, 60_000);
      afterAll(async () => {
        await app?.stop();
        await pebble?.stop();
        await zone?.close();
      });

      it('a verified domain gets a certificate over HTTP-01 and is served over TLS by SNI; the key is stored sealed', async () => {
        const root = `tls${serial++}-${kind}.test`;
        zone.addZone(root);
        const host = `www.${root}`;
        const u = await publisher(app);
        const bucket = await newBucket(app, u.key);
        await uploadFolder(app, u.key, bucket.id, { 'index.html': 'over tls' });
        const p = await publishAndWait(app, u.key, bucket.id);
        const add = await app.request('POST', `/api/v1/buckets/${bucket.id}/custom_domains`, { key: u.key, body: { hostname: host } });
        expect(add.status, add.text).toBe(201);
        const d = add.body.data.domain;
        expect(d.tls).toEqual({ mode: 'acme', status: 'none', expires_at: null, error: null });
        expect(d.url).toBe(`https://${host}:${tlsPort}`);
        for (const r of d.dns_records) if (r.type === 'TXT') zone.txt(r.name, r.value);
        zone.a(host, '127.0.0.1');
        const v = await app.request('POST', `/api/v1/buckets/${bucket.id}/custom_domains/${d.id}/verify`, { key: u.key });
        expect(v.body.data.domain.status, v.text).toBe('verified');

        // The certificate job runs: Pebble fetches http://<host>:<sites port>/.well-known/acme-challenge/<token>.
        await app.started.deps.jobs.worker!.drain();
        const read = await app.request('GET', `/api/v1/buckets/${bucket.id}/custom_domains/${d.id}`, { key: u.key });
        expect(read.body.data.domain.tls.error).toBeNull();
        expect(read.body.data.domain.tls.status).toBe('issued');
        expect(Date.parse(read.body.data.domain.tls.expires_at)).toBeGreaterThan(Date.now() + 30 * 86_400_000);

        const row = await app.started.deps.db.selectFrom('site_domains').selectAll().where('id', '=', d.id).executeTakeFirstOrThrow();
        expect(row.cert_pem).toContain('BEGIN CERTIFICATE');
        expect(row.cert_key_sealed).toMatch(/^v1\./);
        expect(row.cert_key_sealed).not.toContain('PRIVATE KEY');
        expect(row.acme_token).toBeNull();

        const ca = await pebble.root();
        const res = await httpsGet(tlsPort, host, ca);
        expect(res.status).toBe(200);
        expect(res.body).toBe('over tls');
        expect(res.cert.subjectaltname).toBe(`DNS:${host}`);
        // An unknown name gets no handshake.
        await expect(httpsGet(tlsPort, `nope.${root}`, ca)).rejects.toThrow();
        // Plain HTTP on the domain now redirects to https (the challenge path excepted).
        const plain = await siteFetch(`http://${host}:${sitesPort}/a?b=1`);
        expect(plain.status).toBe(301);
        expect(plain.headers.location).toBe(`https://${host}:${tlsPort}/a?b=1`);
        // The slug URL points at the https address.
        expect((await siteFetch(`${p.public_url}/`)).headers.location).toBe(`https://${host}:${tlsPort}/`);
      }, 120_000);

      it('the challenge path answers only the token of a domain on that host', async () => {
        const db = app.started.deps.db;
        const root = `ch${serial++}-${kind}.test`;
        const u = await publisher(app);
        const bucket = await newBucket(app, u.key);
        const add = await app.request('POST', `/api/v1/buckets/${bucket.id}/custom_domains`, { key: u.key, body: { hostname: `a.${root}` } });
        await db.updateTable('site_domains').set({ acme_token: 'tok-123', acme_key_authorization: 'tok-123.thumb' }).where('id', '=', add.body.data.domain.id).execute();
        const ok = await siteFetch(`http://a.${root}:${sitesPort}/.well-known/acme-challenge/tok-123`);
        expect(ok.status).toBe(200);
        expect(ok.text).toBe('tok-123.thumb');
        expect((await siteFetch(`http://b.${root}:${sitesPort}/.well-known/acme-challenge/tok-123`)).status).toBe(404);
        expect((await siteFetch(`http://a.${root}:${sitesPort}/.well-known/acme-challenge/other`)).status).toBe(404);
      });
    });
  }
});
