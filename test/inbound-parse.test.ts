import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { parseMessage, type ParsedEmail } from '../src/inbound/parse.ts';
import { patchBase64Decoder, patchPassThroughDecoder, patchReadLine } from '../src/inbound/parse-mime.ts';
import { hostileMessages, noise } from './fixtures/hostile.ts';
import { checkSafeHtml, checkSane, FIXTURES, fixtureFiles } from './inbound-parse-helpers.ts';

const OPTS = { deliveredTo: 'Box-ab12@Cubby.Test', receivedAt: new Date('2026-01-02T03:04:05.000Z') };
const parse = (raw: Buffer | Readable | string, extra: Record<string, unknown> = {}) =>
  parseMessage(typeof raw === 'string' ? Buffer.from(raw) : raw, { ...OPTS, ...extra });
const fixture = (name: string) => parse(readFileSync(FIXTURES + name));
const names = (p: ParsedEmail) => p.attachments.map((a) => a.filename);

describe('fixture messages', () => {
  const files = fixtureFiles();

  it('finds all 107 messages', () => expect(files).toHaveLength(107));

  it('parses every message without throwing, with sane output', async () => {
    for (const file of files) {
      const p = await fixture(file);
      try {
        checkSane(p);
      } catch (err) {
        throw new Error(`${file}: ${(err as Error).message}`);
      }
      expect(p.delivered_to).toBe('Box-ab12@cubby.test');
      expect(p.messageJson().received_at).toBe('2026-01-02T03:04:05.000Z');
    }
  });

  it('parses 2,000 deterministic mutations of them (cut, spliced, overwritten) with sane output', async () => {
    const sources = files.map((f) => readFileSync(FIXTURES + f));
    let x = 12345;
    const rnd = (n: number) => { x ^= x << 13; x >>>= 0; x ^= x >>> 17; x ^= x << 5; x >>>= 0; return x % n; };
    for (let i = 0; i < 2000; i++) {
      const src = Buffer.from(sources[rnd(sources.length)]);
      const a = rnd(src.length + 1);
      const op = rnd(3);
      const raw = op === 0 ? src.subarray(0, a)
        : op === 1 ? Buffer.concat([src.subarray(0, a), src.subarray(rnd(src.length + 1))])
        : Buffer.concat([src.subarray(0, a), Buffer.alloc(rnd(200), rnd(256)), src.subarray(a)]);
      checkSane(await parse(raw));
    }
  });

  it.each([
    // Raw 8-bit Latin-1 byte inside an encoded word: postal-mime alone gives "Frï¿½sche".
    ['legacy/009.eml', 'Die Hasen und die Frösche'],
    // Raw Latin-1 subject: postal-mime alone gives "Fr\ufffdsche".
    ['legacy/010.eml', 'Die Hasen und die Frösche'],
    // UTF-7 encoded word, which TextDecoder does not know.
    ['legacy/001.eml', 'Die Hasen und die Frösche (Microsoft Outlook 00)'],
    ['thirdparty/010.eml', 'こんにちは'],
    ['thirdparty/014.eml', '[Shapelib] need some help'],
    ['rfc/008.eml', null],
  ])('decodes the subject of %s', async (file, subject) => {
    expect((await fixture(file)).subject).toBe(subject);
  });

  it('keeps address order, display names and UTF-7 names; drops addresses without a domain', async () => {
    const p = await fixture('legacy/001.eml');
    expect(p.from_addresses).toEqual([{ address: 'doug@example.com', name: 'Doug Sauder' }]);
    expect(p.to_addresses).toEqual([
      { address: 'jblow@example.com', name: 'Joe Blow' },
      { address: 'schmuergen@example.com', name: 'Jürgen Schmürgen' },
    ]);
    const rfc = await fixture('rfc/001.eml'); // From: Whomever, To: Someone
    expect(rfc.from_addresses).toEqual([]);
    expect(rfc.to_addresses).toEqual([]);
    expect(rfc.warnings).toContain('from_invalid_address_dropped');
    const list = await fixture('thirdparty/014.eml');
    expect(list.reply_to_addresses).toEqual([{ address: 'shapelib@lists.maptools.org', name: 'Shapelib Development' }]);
    expect(list.list_headers.precedence).toBe('list');
    expect(list.list_headers.list_id).toBe('Shapelib Development <shapelib.lists.maptools.org>');
  });

  it('strips brackets from Message-ID, keeps case, and is null when absent', async () => {
    expect((await fixture('legacy/000.eml')).message_id).toBe('NDBBIAKOPKHFGPLCODIGKEKECHAA.doug@example.com');
    expect((await fixture('thirdparty/014.eml')).message_id).toBe('325993.29502.qm@web28416.mail.ukl.yahoo.com');
    expect((await fixture('malformed/022.eml')).message_id).toBeNull();
  });

  it('lists attachments in order with safe names and hashes', async () => {
    const three = await fixture('legacy/008.eml');
    expect(names(three)).toEqual(['blueball.png', 'greenball.png', 'redball.png']);
    expect(three.attachments.map((a) => a.size_bytes)).toEqual([1325, 1298, 1453]);
    const onlyImage = await fixture('legacy/000.eml');
    expect(onlyImage.body_status).toBe('empty');
    expect(onlyImage.attachments[0]).toMatchObject({ filename: 'redball.png', content_type: 'image/png', disposition: 'attachment' });
    // filename="C:\TEMP\nsmailEG.png": postal-mime unescapes the quoted pairs; the colon is replaced.
    const netscape = await fixture('legacy/035.eml');
    expect(names(netscape)).toEqual(['C_TEMPnsmailEG.png', 'C_TEMPnsmail39.png', 'redball.png', 'greenball.png']);
    expect(netscape.attachments[0].content_id).toBe('part1.39235FC5.E71D8178@example.com');
    // name="/u/nsb/writing/rfcs/RFC-MIME.ps" keeps its basename; a part without a name gets one.
    expect(names(await fixture('rfc/001.eml'))).toEqual(['BodyFormats.ps', 'RFC-MIME.ps', 'attachment-3.bin']);
    expect(names(await fixture('thirdparty/015.eml'))).toEqual(['training-mail.txt', 'office-reply.txt', 'shop-mail.txt']);
    const broken = await fixture('malformed/022.eml');
    expect(broken.attachments.map((a) => [a.filename, a.content_type])).toEqual([['broken.eml', 'message/rfc822']]);
    expect(broken.body_text).toBe('hello\n');
  });

  it('sanitizes HTML and keeps cid: images', async () => {
    const p = await fixture('thirdparty/016.eml');
    expect(p.body_html_sanitized).toContain('<img alt="" src="cid:part1.8C5E6A81.D0C1B91A@example.com" />');
    expect(p.body_text).toBe('Search for höhö');
    expect(p.attachments[0]).toMatchObject({ disposition: 'inline', content_id: 'part1.8C5E6A81.D0C1B91A@example.com' });
  });
});

describe('hostile corpus', () => {
  const corpus = hostileMessages();
  const results = new Map<string, ParsedEmail>();

  it.each(corpus.map((m) => [m.name, m] as const))('%s parses within bounds', async (_name, m) => {
    const started = performance.now();
    const p = await parse(m.raw);
    // A loose sanity guard against pathological inputs (runaway backtracking takes minutes), not a
    // performance assertion: wide enough for a full suite on two busy cores (huge-html took 5.6 s).
    expect(performance.now() - started).toBeLessThan(25_000);
    checkSane(p);
    results.set(m.name, p);
  });

  const r = (name: string) => {
    const p = results.get(name);
    if (!p) throw new Error(`${name} was not parsed`);
    return p;
  };

  it('decodes a base64 body of padding runs to nothing, once', () => {
    expect(r('base64-padding-flood').attachments.map((a) => [a.filename, a.content.length])).toEqual([['pad.bin', 0]]);
  });

  it('caps header counts and sizes, and reads fields past them', () => {
    expect(r('5000-headers').headers).toHaveLength(500);
    expect(r('5000-headers').headers_truncated).toBe(true);
    expect(r('1mb-header-line').subject).toHaveLength(1000);
    expect(r('1mb-header-line').warnings).toEqual(expect.arrayContaining(['headers_truncated', 'subject_truncated']));
    // 3 MB of folded header: postal-mime alone rejects the whole message.
    expect(r('3mb-folded-header')).toMatchObject({ subject: 'hostile', body_status: 'complete', headers_truncated: true });
    expect(r('huge-to-list').to_addresses).toHaveLength(500);
    expect(r('deep-comments-in-from').from_addresses).toEqual([]);
    expect(r('empty')).toMatchObject({ subject: null, body_status: 'empty', headers: [] });
    expect(r('nul-bytes').subject).toBe('ab');
  });

  it('applies the Message-ID rules', () => {
    expect(r('duplicate-message-id-same').message_id).toBe('Same@Example.com');
    expect(r('duplicate-message-id-different').message_id).toBeNull();
    expect(r('message-id-two-ids')).toMatchObject({ message_id: null, warnings: ['message_id_ambiguous'] });
    expect(r('message-id-with-space').message_id).toBeNull();
    expect(r('message-id-huge').message_id).toBeNull();
  });

  it('caps References keeping the root and the latest; dedupes In-Reply-To', () => {
    const p = r('10000-references');
    expect(p.references).toHaveLength(100);
    expect(p.references[0]).toBe('r0@example.com');
    expect(p.references[1]).toBe('r9901@example.com');
    expect(p.references[99]).toBe('r9999@example.com');
    expect(p.in_reply_to).toEqual(['r9999@example.com']);
    expect(p.conversation_hint).toBe('r0@example.com');
  });

  it('decodes non-UTF-8 headers and bodies', () => {
    expect(r('latin1-raw-subject').subject).toBe('Grüße aus Köln');
    expect(r('latin1-raw-subject').from_addresses).toEqual([{ address: 'joerg@example.de', name: 'Jörg' }]);
    expect(r('latin1-raw-subject').body_text).toBe('Köln\n');
    expect(r('sjis-raw-subject').subject).toBe('こんにちは');
    expect(r('koi8r-encoded-word').subject).toBe('Привет');
    expect(r('utf7-body').body_text).toBe('Hi Mom -☺-!\n');
    expect(r('unknown-charset').body_status).toBe('complete');
  });

  it('bounds MIME structure', () => {
    const rfc822 = r('nested-rfc822-50');
    expect(rfc822.body_status).toBe('complete');
    expect(rfc822.attachments.map((a) => [a.filename, a.content_type])).toEqual([['attachment-1.eml', 'message/rfc822']]);
    expect(rfc822.warnings).toContain('rfc822_depth_exceeded');
    // Too deep to parse: the headers are still there.
    expect(r('nested-multipart-300')).toMatchObject({ subject: 'hostile', message_id: 'hostile@example.com', body_status: 'unavailable' });
    const parts = r('20000-parts');
    expect(parts.body_status).toBe('truncated');
    expect(parts.attachment_count).toBe(100);
    expect(parts.omitted_attachment_count).toBe(19_900);
    expect(r('boundary-no-terminator').attachments.map((a) => a.filename)).toEqual(['cut.txt']);
  });

  it('caps attachments and makes their names safe', () => {
    expect(r('150-attachments')).toMatchObject({ attachment_count: 100, omitted_attachment_count: 50 });
    expect(r('empty-attachment').attachments[0]).toMatchObject({ filename: 'empty.pdf', size_bytes: 0 });
    const big = r('big-attachment-8mb').attachments[0];
    expect(big.sha256).toBe(createHash('sha256').update(noise(8 * 1024 * 1024)).digest('hex'));
    expect(names(r('hostile-filenames'))).toEqual([
      'passwd', 'win.ini', 'secret_.txt', 'a_b_c.txt', 'attachment-5.bin', 'attachment-6.bin', 'attachment-7.bin',
      `${'long'.repeat(49)}.pdf`, 'photo_gnp.exe', 'café.txt', 'message (2).json', 'MESSAGE (2).eml', 'dup.txt', 'dup (2).txt',
      'con_aux_.txt', 'attachment-16.png',
    ]);
  });

  it('caps and sanitizes bodies', () => {
    expect(r('long-line-body')).toMatchObject({ body_status: 'truncated' });
    expect(Buffer.byteLength(r('long-line-body').body_text!)).toBe(1024 * 1024);
    const html = r('hostile-html').body_html_sanitized!;
    checkSafeHtml(html);
    expect(html).toContain('<a href="https://example.com/ok" target="_blank" rel="noopener noreferrer nofollow">ok</a>');
    expect(html).toContain('<img alt="logo" src="cid:logo@x" />');
    expect(html).toContain('<p style="color:red">Hi <b>there</b></p>');
    expect(html).not.toMatch(/tracker|evil|svg\+xml|password|class=|id=/);
    expect(r('html-only-alternative').body_text).toBe('Only HTML here\nsecond line\n\n- one\n- two');
    expect(r('huge-html')).toMatchObject({ body_status: 'truncated' });
    expect(r('deep-html').warnings).toContain('html_nesting_repaired');
  });
});

describe('inputs, options and address rules', () => {
  const threaded = [
    'From: "Smith, Ann" <Ann.Smith@Example.COM>, bob@EXAMPLE.org',
    'To: Team: a@x.test, "B" <b@Y.TEST>;, c@z.test, not-an-address, @nolocal.test',
    'Cc: undisclosed-recipients:;',
    'Cc: d@w.test',
    'Reply-To: =?utf-8?Q?J=C3=BCrgen?= <j@x.test>',
    'Subject: =?utf-8?B?8J+Ygw==?= threaded',
    'Message-ID: <CaseKept@Host.Test> (comment)',
    'In-Reply-To: <p2@h> (Fred\'s message) <p1@h> <p2@h>',
    'References: <root@h>\r\n <p1@h>',
    'References: <p1@h> <p2@h>',
    'Date: Tue, 1 Jul 2025 10:00:00 +0200',
    '',
    'hi',
  ].join('\r\n');

  it('flattens groups, keeps header order, lower-cases domains only, and threads', async () => {
    const p = await parse(threaded);
    expect(p.from_addresses).toEqual([{ address: 'Ann.Smith@example.com', name: 'Smith, Ann' }, { address: 'bob@example.org', name: null }]);
    expect(p.to_addresses.map((a) => a.address)).toEqual(['a@x.test', 'b@y.test', 'c@z.test']);
    expect(p.cc_addresses.map((a) => a.address)).toEqual(['d@w.test']);
    expect(p.reply_to_addresses).toEqual([{ address: 'j@x.test', name: 'Jürgen' }]);
    expect(p.subject).toBe('😃 threaded');
    expect(p.message_id).toBe('CaseKept@Host.Test');
    expect(p.in_reply_to).toEqual(['p2@h', 'p1@h']);
    expect(p.references).toEqual(['root@h', 'p1@h', 'p2@h']);
    expect(p.conversation_hint).toBe('root@h');
    expect(p.date).toBe('2025-07-01T08:00:00.000Z');
    expect(p.body_status).toBe('complete');
  });

  it('reads a stream, and cuts a message over maxParseBytes without holding it', async () => {
    const raw = hostileMessages().find((m) => m.name === 'big-attachment-8mb')!.raw;
    const whole = await parse(Readable.from([raw.subarray(0, 1000), raw.subarray(1000)]));
    expect(whole.attachments[0].size_bytes).toBe(8 * 1024 * 1024);
    const stream = Readable.from((function* () { for (let i = 0; i < raw.length; i += 65536) yield raw.subarray(i, i + 65536); })());
    const cut = await parse(stream, { maxParseBytes: 1024 * 1024 });
    expect(cut).toMatchObject({ body_status: 'truncated', attachment_count: 0, omitted_attachment_count: 1, subject: 'hostile' });
    expect(cut.warnings).toContain('message_cut_at_parse_limit');
    expect(stream.destroyed).toBe(true);
  });

  it('takes caps from the options', async () => {
    const raw = hostileMessages().find((m) => m.name === '150-attachments')!.raw;
    expect(await parse(raw, { maxAttachments: 2 })).toMatchObject({ attachment_count: 2, omitted_attachment_count: 148 });
    expect(await parse(raw, { maxAttachmentBytes: 20 })).toMatchObject({ attachment_count: 3, omitted_attachment_count: 147 });
  });

  it('never throws on odd arguments', async () => {
    const p = await parseMessage(null as unknown as Buffer, { deliveredTo: undefined as unknown as string, receivedAt: new Date(NaN) });
    expect(p.body_status).toBe('empty');
    checkSane(p);
  });

  it('keeps unencoded (8bit) parts intact with the chunking decoder', async () => {
    expect(patchPassThroughDecoder()).toBe('patched');
    const csv = Array.from({ length: 200_000 }, (_, i) => `${i},value ${i}`).join('\n');
    const raw = `From: a@b.test\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain\r\n\r\nsee csv\r\n--b\r\nContent-Type: text/csv\r\nContent-Disposition: attachment; filename=big.csv\r\n\r\n${csv}\r\n--b--\r\n`;
    const p = await parse(raw);
    expect(p.body_text).toBe('see csv\n');
    expect(p.attachments[0].content.toString()).toBe(`${csv}\n`);
  });

  it('decodes base64 attachments by the rules of postal-mime, with the decoder of Node', async () => {
    expect(patchBase64Decoder()).toBe('patched');
    // postal-mime's rules, as a reference: characters outside the alphabet dropped, each run of
    // "=" ending a unit decoded on its own (a last group of one character carries no byte).
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const reference = (body: Buffer): Buffer => {
      const out: number[] = [];
      for (const unit of body.toString('latin1').replace(/[^a-zA-Z0-9+/=]+/g, '').split(/=+/)) {
        const v = [...unit].map((c) => alphabet.indexOf(c));
        for (let i = 0; i + 1 < v.length; i += 4) {
          out.push(((v[i]! << 2) | (v[i + 1]! >> 4)) & 255);
          if (i + 2 < v.length) out.push(((v[i + 1]! << 4) | (v[i + 2]! >> 2)) & 255);
          if (i + 3 < v.length) out.push(((v[i + 2]! << 6) | v[i + 3]!) & 255);
        }
      }
      return Buffer.from(out);
    };
    let seed = 7;
    const rnd = (n: number) => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) % n);
    const junk = [' ', '\t', '*', '-', '_', '.', '\r', '\u00e9', '\u00ff', '=', '==', '===', '\u0000', '!', '\u0080'];
    for (let round = 0; round < 40; round++) {
      const data = Buffer.from(Array.from({ length: rnd(3) === 0 ? rnd(40) : 1000 + rnd(200_000) }, () => rnd(256)));
      let b64 = data.toString('base64');
      if (round % 2) {
        // Junk and padding anywhere (half of the rounds are clean, as mail mostly is).
        const chars = [...b64];
        for (let k = rnd(30); k > 0; k--) chars.splice(rnd(chars.length + 1), 0, junk[rnd(junk.length)]!);
        b64 = chars.join('');
      }
      const width = [0, 1, 3, 76, 77, 1000, 70_000][round % 7]!;
      const lines = width ? (b64.match(new RegExp(`[^]{1,${width}}`, 'g')) ?? []) : [b64];
      const body = Buffer.from(`${lines.join(round % 3 ? '\r\n' : '\n')}\r\n`, 'latin1');
      const raw = Buffer.concat([
        Buffer.from('From: a@b.test\r\nContent-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\nContent-Type: text/plain\r\n\r\nsee\r\n--zz\r\nContent-Type: application/octet-stream\r\nContent-Disposition: attachment; filename=d.bin\r\nContent-Transfer-Encoding: base64\r\n\r\n'),
        body,
        Buffer.from('--zz--\r\n'),
      ]);
      const p = await parse(raw, { maxAttachmentBytes: 10 * 1024 * 1024 });
      const want = reference(body);
      const got = p.attachments[0]?.content ?? Buffer.alloc(0);
      expect(got.equals(want), `round ${round}: ${got.length} bytes, expected ${want.length}`).toBe(true);
      if (round % 2 === 0 && width) expect(got.equals(data), `round ${round}`).toBe(true);
    }
  });

  it('reads lines with indexOf once it agrees with postal-mime on awkward line breaks', async () => {
    expect(patchReadLine()).toBe('patched');
    const raw = 'From: a@b.test\nContent-Type: multipart/mixed; boundary=zz\r\n\r\n--zz\r\r\nContent-Type: text/plain\n\none\r\rtwo\r\n\nthree\r\r\n--zz--';
    const p = await parse(raw);
    // What the unpatched parser gives too (CRs alone become line breaks downstream).
    expect(p.body_text).toBe('one\n\ntwo\n\nthree\n');
  });

  it('message.json holds everything but the attachment bytes', async () => {
    const p = await parse(threaded);
    expect(Object.keys(p.messageJson()).sort()).toEqual([
      'attachment_count', 'attachments', 'body_status', 'cc', 'date', 'delivered_to', 'from', 'headers', 'headers_truncated', 'html',
      'in_reply_to', 'list_headers', 'message_id', 'omitted_attachment_count', 'received_at', 'references', 'reply_to', 'subject',
      'text', 'to', 'version', 'warnings',
    ]);
    expect(p.messageJson().headers[0]).toEqual({ name: 'From', value: '"Smith, Ann" <Ann.Smith@Example.COM>, bob@EXAMPLE.org' });
  });
});
