import { generateKeyPairSync } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import { dkimSign, sealMessage, type ARCSealOptions, type DKIMSignOptions } from 'mailauth';
import type { DnsResolver } from '../src/inbound/authenticate.ts';

/** Zone data for the in-memory DNS: name → rrtype → answer as dns.promises.resolve gives it. */
export type Zone = Record<string, Partial<Record<'TXT' | 'A' | 'AAAA' | 'MX', unknown[]>>>;

const dnsErr = (code: string, name: string) => Object.assign(new Error(`${code} ${name}`), { code });

/** The DNS of the tests: a table. Unknown names are ENOTFOUND, known names without the type ENODATA. */
export function tableResolver(zone: Zone): DnsResolver & { queries: string[] } {
  const queries: string[] = [];
  const resolve = async (name: string, rrtype: string) => {
    const key = name.toLowerCase().replace(/\.$/, '');
    queries.push(`${key} ${rrtype}`);
    const entry = zone[key];
    if (!entry) throw dnsErr('ENOTFOUND', key);
    const answer = entry[rrtype as keyof typeof entry];
    if (!answer) throw dnsErr('ENODATA', key);
    return answer;
  };
  return Object.assign(resolve, { queries });
}

/** TXT strings are at most 255 bytes each in DNS; long records come back as several. */
export const txt = (record: string): string[][] => [record.match(/.{1,255}/g) ?? []];

export interface Key {
  privateKey: string;
  record: string[][];
}

export function rsaKey(): Key {
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const p = publicKey.export({ type: 'spki', format: 'der' }).toString('base64');
  return { privateKey: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(), record: txt(`v=DKIM1; k=rsa; p=${p}`) };
}

export function message(opts: { from?: string; subject?: string; body?: string; extraHeaders?: string } = {}): Buffer {
  const from = opts.from ?? 'Alice <alice@example.com>';
  return Buffer.from(
    `${opts.extraHeaders ?? ''}From: ${from}\r\nTo: box-ab12@cubby.test\r\nSubject: ${opts.subject ?? 'Quarterly figures'}\r\n` +
      `Date: Mon, 05 Jan 2026 10:00:00 +0000\r\nMessage-ID: <m1@example.com>\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n` +
      (opts.body ?? 'Hello,\r\nthe figures are attached.\r\n'),
  );
}

export async function dkimSigned(raw: Buffer, signers: { domain: string; selector: string; key: Key }[]): Promise<Buffer> {
  const signed = await dkimSign(raw, {
    canonicalization: 'relaxed/relaxed',
    // Without signTime, mailauth's signer reads the clock twice for t= (once for the signed copy of
    // the field, once for the field it returns): when the rounded second changes in between, the
    // signature is bad. Twelve signatures under a loaded test run crossed it now and then.
    signTime: new Date(),
    signatureData: signers.map((s) => ({ signingDomain: s.domain, selector: s.selector, privateKey: s.key.privateKey })),
  } as DKIMSignOptions); // the typings miss the several-signature form the README documents
  if (signed.errors.length) throw signed.errors[0];
  return Buffer.concat([Buffer.from(signed.signatures), raw]);
}

/** ARC set i=1 as a forwarder adds it (cv=none: no earlier chain). */
export async function arcSealed(raw: Buffer, domain: string, selector: string, key: Key): Promise<Buffer> {
  const seal = {
    signingDomain: domain, selector, privateKey: key.privateKey, cv: 'none',
    signTime: new Date(), // the message signature has dkimSigned's two-clock-reads problem without it
    authResults: `mx.${domain}; dkim=pass header.d=example.com; spf=pass smtp.mailfrom=example.com; dmarc=pass header.from=example.com`,
  } as ARCSealOptions;
  return Buffer.concat([await sealMessage(raw, seal), raw]);
}

/**
 * A UDP name server on 127.0.0.1 for systemResolver: `answer` returns TXT strings for a name,
 * null for NXDOMAIN, or 'silent' to never reply.
 */
export async function fakeNameServer(answer: (name: string) => string[] | null | 'silent'): Promise<{ address: string; close(): Promise<void> }> {
  const socket: Socket = createSocket('udp4');
  socket.on('message', (query, peer) => {
    let at = 12;
    const labels: string[] = [];
    while (query[at] > 0) {
      labels.push(query.subarray(at + 1, at + 1 + query[at]).toString('latin1'));
      at += query[at] + 1;
    }
    const question = query.subarray(12, at + 5);
    const reply = answer(labels.join('.').toLowerCase());
    if (reply === 'silent') return;
    const header = Buffer.alloc(12);
    query.copy(header, 0, 0, 2); // id
    header.writeUInt16BE(0x8180 | (reply ? 0 : 3), 2); // QR, RD, RA; rcode 3 = NXDOMAIN
    header.writeUInt16BE(1, 4);
    header.writeUInt16BE(reply ? 1 : 0, 6);
    const parts = [header, question];
    if (reply) {
      const rdata = Buffer.concat(reply.map((s) => Buffer.concat([Buffer.from([Buffer.byteLength(s)]), Buffer.from(s)])));
      const rr = Buffer.alloc(12);
      rr.writeUInt16BE(0xc00c, 0); // pointer to the question's name
      rr.writeUInt16BE(16, 2); // TXT
      rr.writeUInt16BE(1, 4); // IN
      rr.writeUInt32BE(60, 6);
      rr.writeUInt16BE(rdata.length, 10);
      parts.push(rr, rdata);
    }
    socket.send(Buffer.concat(parts), peer.port, peer.address);
  });
  await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
  return {
    address: `127.0.0.1:${socket.address().port}`,
    close: () => new Promise<void>((resolve) => socket.close(() => resolve())),
  };
}
