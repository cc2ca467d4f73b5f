import sanitizeHtml from 'sanitize-html';
import type { Readable } from 'node:stream';
import type { AppDeps } from '../context.ts';
import type { EmailsTable } from '../db/schema.ts';
import { boundHtmlNesting, SANITIZE_OPTIONS } from '../inbound/parse-html.ts';
import { parseMime } from '../inbound/parse-mime.ts';
import { headerList, headerFallbackDecoder, readHeaderBlock } from '../inbound/parse-headers.ts';
import { DEFAULT_LIMITS, type HeaderField } from '../inbound/parse-types.ts';

// What the email page shows from the stored original message: the HTML body for the sandboxed
// viewer, the header list and the source. The stored body (message.json) drops remote images;
// the viewer keeps their addresses so that "Load remote content" can show them, and the frame's
// own CSP (email.pages.ts) decides whether the browser may fetch them. Everything else is the
// inbound sanitizer's policy: no script, no event handler, no form, no url() in styles.

const MAX_VIEW_BYTES = 12 * 1024 * 1024;
export const MAX_SOURCE_CHARS = 512 * 1024;
const MAX_HTML_DEPTH = 1000;
const REMOTE = /^https?:\/\//i;

const VIEWER_OPTIONS: sanitizeHtml.IOptions = {
  ...SANITIZE_OPTIONS,
  allowedSchemesByTag: { img: ['cid', 'data', 'http', 'https'] },
  transformTags: {
    ...SANITIZE_OPTIONS.transformTags,
    img: (tagName, attribs) => {
      const src = (attribs.src ?? '').trim();
      const { src: _drop, ...rest } = attribs;
      const ok = /^data:image\/(?:png|gif|jpe?g|webp|bmp);base64,/i.test(src) || REMOTE.test(src);
      return { tagName, attribs: ok ? { ...rest, src } : { ...rest, alt: rest.alt ?? '' } };
    },
  },
  exclusiveFilter: (frame) => frame.tag === 'img' && !frame.attribs.src,
};

async function readAll(stream: Readable, max: number): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of stream) {
    const b = chunk as Buffer;
    chunks.push(b);
    size += b.length;
    if (size > max) {
      stream.destroy();
      break;
    }
  }
  return Buffer.concat(chunks).subarray(0, max);
}

/** The bytes of the original message as received (at most 12 MB), or null when not stored. */
export async function rawBytes(deps: AppDeps, email: EmailsTable): Promise<Buffer | null> {
  if (!email.raw_file_id) return null;
  let q = deps.db
    .selectFrom('files')
    .innerJoin('file_versions', 'file_versions.file_id', 'files.id')
    .select(['file_versions.sha256'])
    .where('files.id', '=', email.raw_file_id)
    .where('files.mailbox_id', '=', email.mailbox_id)
    .where('files.deleted_at', 'is', null);
  q = email.raw_version_id ? q.where('file_versions.id', '=', email.raw_version_id) : q.whereRef('file_versions.id', '=', 'files.current_version_id');
  const v = await q.executeTakeFirst();
  if (!v?.sha256) return null;
  try {
    return await readAll(await deps.blobs.read(v.sha256), MAX_VIEW_BYTES);
  } catch {
    return null;
  }
}

export interface ViewedMessage {
  /** Sanitized HTML with remote image addresses kept, or null when the message has no HTML. */
  html: string | null;
  hasRemote: boolean;
  headers: HeaderField[];
}

export async function viewMessage(raw: Buffer): Promise<ViewedMessage> {
  const block = readHeaderBlock(raw, DEFAULT_LIMITS);
  const { headers } = headerList(block, DEFAULT_LIMITS, headerFallbackDecoder(block));
  const mime = await parseMime(raw, block, DEFAULT_LIMITS, () => {});
  const source = typeof mime.email?.html === 'string' ? mime.email.html.slice(0, DEFAULT_LIMITS.maxHtmlBytes).replace(/\u0000/g, '') : '';
  if (!source.trim()) return { html: null, hasRemote: false, headers };
  const html = sanitizeHtml(boundHtmlNesting(source, MAX_HTML_DEPTH).html, VIEWER_OPTIONS);
  return { html: html.trim() ? html : null, hasRemote: /<img[^>]+src="https?:/i.test(html), headers };
}

/** The frame document: the sanitized body; links open outside the frame. */
export function frameDocument(body: string): string {
  return `<!doctype html><html><head><meta charset="utf-8"><base target="_blank"><meta name="referrer" content="no-referrer"><style>body{margin:12px;font:14px/1.5 system-ui,sans-serif;color:#1c2430;background:#fff;overflow-wrap:anywhere}img{max-width:100%;height:auto}table{max-width:100%}</style></head><body>${body}</body></html>`;
}
