import { describe, expect, it } from 'vitest';
import { Extractor, extractKind } from '../src/search/extract/extract.ts';
import { makePdf } from './search-documents.ts';

describe('text extractor thread', () => {
  it('gives up on a document past its time, replaces the thread, and goes on', async () => {
    const slow = new Extractor({ timeoutMs: 1, maxMemoryMb: 64 });
    try {
      expect((await slow.extract('pdf', makePdf('one'))).status).toBe('timeout');
    } finally {
      await slow.close();
    }
    const ok = new Extractor({ timeoutMs: 20_000, maxMemoryMb: 64 });
    try {
      const first = ok.extract('text', Buffer.from('alpha'));
      const second = ok.extract('pdf', makePdf('beta page'));
      expect(await first).toMatchObject({ status: 'done', text: 'alpha' });
      expect(await second).toMatchObject({ status: 'done', text: 'beta page', pages: 1 });
    } finally {
      await ok.close();
    }
  });

  it('cuts text at the output limit', async () => {
    const e = new Extractor({ timeoutMs: 20_000, maxMemoryMb: 64, limits: { maxTextChars: 100 } });
    try {
      const r = await e.extract('text', Buffer.from('word '.repeat(1000)));
      expect(r.status).toBe('done');
      expect(r.truncated).toBe(true);
      expect(r.text!.length).toBeLessThanOrEqual(100);
    } finally {
      await e.close();
    }
  });

  it('chooses an extractor by type, then by name', () => {
    expect(extractKind('a.pdf', 'application/pdf')).toBe('pdf');
    expect(extractKind('a.bin', 'application/octet-stream')).toBeNull();
    expect(extractKind('report.docx', 'application/octet-stream')).toBe('docx');
    expect(extractKind('message.eml', 'message/rfc822')).toBeNull();
    expect(extractKind('message.json', 'application/json')).toBeNull();
    expect(extractKind('photo.jpg', 'image/jpeg')).toBeNull();
    expect(extractKind('x', 'text/plain; charset=utf-8')).toBe('text');
  });
});
