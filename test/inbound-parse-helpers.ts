import { createHash } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { Parser } from 'htmlparser2';
import { expect } from 'vitest';
import type { EmailAddress, ParsedEmail } from '../src/inbound/parse.ts';

export const FIXTURES = new URL('./fixtures/eml/', import.meta.url).pathname;
export const STATUSES = ['complete', 'empty', 'truncated', 'unavailable'];

/** Every .eml under test/fixtures/eml (COPYING and README files skipped), as relative paths. */
export function fixtureFiles(dir = FIXTURES, prefix = ''): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const full = join(dir, name);
    if (statSync(full).isDirectory()) return fixtureFiles(full, `${prefix}${name}/`);
    return name.endsWith('.eml') ? [`${prefix}${name}`] : [];
  });
}

export function isSafeFilename(name: string): boolean {
  return typeof name === 'string'
    && name.length > 0
    && name === name.normalize('NFC')
    && Buffer.byteLength(name) <= 200
    && !/[\u0000-\u001f\u007f-\u009f/\\\u200b-\u200f\u202a-\u202e\u2066-\u2069]/.test(name)
    && !name.startsWith('.') && !name.endsWith('.') && name.trim() === name
    && !['message.eml', 'message.json'].includes(name.toLowerCase());
}

function checkAddresses(list: EmailAddress[]) {
  expect(Array.isArray(list)).toBe(true);
  for (const a of list) {
    expect(a.address).toMatch(/^[^\s@]+@[^\s@]+$/);
    const domain = a.address.slice(a.address.lastIndexOf('@') + 1);
    expect(domain).toBe(domain.toLowerCase());
    if (a.name !== null) {
      expect(typeof a.name).toBe('string');
      expect(a.name).not.toMatch(/[\u0000-\u001f]/);
    }
  }
}

const FORBIDDEN_TAGS = new Set(['script', 'style', 'iframe', 'object', 'embed', 'form', 'input', 'button', 'textarea', 'select', 'meta', 'link', 'base', 'svg', 'math']);

/** Parses the sanitized HTML and checks every element and attribute. */
export function checkSafeHtml(html: string | null) {
  if (html === null) return;
  const problems: string[] = [];
  const parser = new Parser({
    onopentag(name, attribs) {
      if (FORBIDDEN_TAGS.has(name)) problems.push(`<${name}>`);
      for (const [attr, value] of Object.entries(attribs)) {
        if (/^on/i.test(attr) || attr === 'id' || attr === 'class') problems.push(`${name}[${attr}]`);
        const v = value.replace(/[\s\u0000-\u001f]/g, '').toLowerCase();
        if (attr === 'href' && !/^(https?:|mailto:|#|[^:]*$)/.test(v)) problems.push(`href=${value}`);
        if (attr === 'src' && !/^(cid:|data:image\/(png|gif|jpe?g|webp|bmp);base64,)/.test(v)) problems.push(`src=${value.slice(0, 40)}`);
        if (attr === 'style' && /url\(|expression|position|@import/i.test(value)) problems.push(`style=${value}`);
      }
    },
  }, { decodeEntities: true });
  parser.write(html);
  parser.end();
  expect(problems).toEqual([]);
}

/** What every parse result must satisfy, whatever the input. */
export function checkSane(p: ParsedEmail) {
  expect(STATUSES).toContain(p.body_status);
  for (const list of [p.from_addresses, p.to_addresses, p.cc_addresses, p.reply_to_addresses]) checkAddresses(list);
  if (p.message_id !== null) expect(p.message_id).toMatch(/^[^\s<>]+$/);
  for (const id of [...p.in_reply_to, ...p.references]) expect(id).toMatch(/^[^\s<>]+$/);
  expect(new Set(p.references).size).toBe(p.references.length);
  expect(p.conversation_hint).toBe(p.references[0] ?? p.in_reply_to[0] ?? null);
  expect(p.headers.length).toBeLessThanOrEqual(500);
  for (const h of p.headers) expect(Buffer.byteLength(h.value)).toBeLessThanOrEqual(8192);
  if (p.subject !== null) expect(p.subject).not.toMatch(/[\u0000-\u001f]/);
  if (p.body_text !== null) {
    expect(p.body_text).not.toContain('\u0000');
    expect(Buffer.byteLength(p.body_text)).toBeLessThanOrEqual(1024 * 1024);
  }
  checkSafeHtml(p.body_html_sanitized);
  expect(p.attachment_count).toBe(p.attachments.length);
  expect(p.attachment_count).toBeLessThanOrEqual(100);
  expect(p.omitted_attachment_count).toBeGreaterThanOrEqual(0);
  const names = new Set<string>();
  for (const a of p.attachments) {
    expect(isSafeFilename(a.filename), `unsafe filename ${JSON.stringify(a.filename)}`).toBe(true);
    expect(names.has(a.filename.toLowerCase()), `duplicate filename ${a.filename}`).toBe(false);
    names.add(a.filename.toLowerCase());
    expect(a.size_bytes).toBe(a.content.length);
    expect(a.sha256).toBe(createHash('sha256').update(a.content).digest('hex'));
    expect(a.content_type).toMatch(/^[a-z0-9][a-z0-9!#$&^_.+-]*\/[a-z0-9][a-z0-9!#$&^_.+-]*$/);
    expect(['attachment', 'inline']).toContain(a.disposition);
  }
  const json = JSON.parse(JSON.stringify(p.messageJson()));
  expect(json.body_status).toBe(p.body_status);
  expect(json.attachments.length).toBe(p.attachments.length);
  for (const a of json.attachments) expect(a).not.toHaveProperty('content');
  expect(JSON.stringify(json)).not.toContain('\\u0000');
}
