// The text-extraction worker thread. Plain JavaScript (not TypeScript) so that it loads the same
// way under `npm start`, the tests and any Node: worker threads do not inherit a TypeScript loader.
// It takes one document at a time ({id, kind, bytes, limits}) and answers {id, status, text, pages,
// error}. The parent kills and replaces the thread when a document runs past its time; memory is
// capped by the thread's resourceLimits. Everything here treats its input as hostile.
import { parentPort } from 'node:worker_threads';
import { unzipSync } from 'fflate';

let pdfjs;
async function loadPdfjs() {
  pdfjs ??= await import('pdfjs-dist/legacy/build/pdf.mjs');
  return pdfjs;
}

class Done extends Error {}

/** Collects text up to a character budget; past it, extraction stops with what it has. */
class Sink {
  constructor(max) {
    this.max = max;
    this.parts = [];
    this.size = 0;
    this.truncated = false;
  }
  add(s) {
    if (!s) return;
    const room = this.max - this.size;
    if (room <= 0) {
      this.truncated = true;
      throw new Done();
    }
    const piece = s.length > room ? s.slice(0, room) : s;
    this.parts.push(piece);
    this.size += piece.length;
    if (piece.length < s.length) {
      this.truncated = true;
      throw new Done();
    }
  }
  text() {
    return this.parts.join('');
  }
}

function decodeUtf8(bytes) {
  // Invalid sequences become U+FFFD, which is then dropped with control characters.
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes);
}

async function plain(bytes, sink) {
  sink.add(decodeUtf8(bytes));
}

async function html(bytes, sink) {
  const { convert } = await import('html-to-text');
  const text = convert(decodeUtf8(bytes), {
    wordwrap: false,
    limits: { maxInputLength: sink.max * 4, maxDepth: 200 },
    selectors: [
      { selector: 'a', options: { ignoreHref: true } },
      { selector: 'img', format: 'skip' },
      { selector: 'script', format: 'skip' },
      { selector: 'style', format: 'skip' },
    ],
  });
  sink.add(text);
}

async function pdf(bytes, sink, limits) {
  const { getDocument } = await loadPdfjs();
  const task = getDocument({ data: bytes, isEvalSupported: false, disableFontFace: true, useSystemFonts: false, verbosity: 0, stopAtErrors: false, maxImageSize: 1 });
  let doc;
  try {
    doc = await task.promise;
  } catch (err) {
    if (err?.name === 'PasswordException') return { status: 'encrypted', error: 'the PDF is password-protected' };
    return { status: 'broken', error: `not a readable PDF (${err?.name ?? 'error'})` };
  }
  let pages = 0;
  try {
    const count = Math.min(doc.numPages, limits.maxPages);
    for (let n = 1; n <= count; n++) {
      const page = await doc.getPage(n);
      const content = await page.getTextContent();
      pages++;
      let line = '';
      for (const item of content.items) {
        if (typeof item.str !== 'string') continue;
        line += item.str;
        line += item.hasEOL ? '\n' : ' ';
      }
      sink.add(`${line}\n\n`);
      page.cleanup();
    }
    if (doc.numPages > count) sink.truncated = true;
  } finally {
    await doc.destroy().catch(() => undefined);
  }
  return { pages };
}

const XML_ENTITY = /&(#x[0-9a-f]+|#\d+|lt|gt|amp|quot|apos);/gi;
function decodeXml(s) {
  return s.replace(XML_ENTITY, (_, e) => {
    const k = e.toLowerCase();
    if (k === 'lt') return '<';
    if (k === 'gt') return '>';
    if (k === 'amp') return '&';
    if (k === 'quot') return '"';
    if (k === 'apos') return "'";
    const code = k.startsWith('#x') ? parseInt(k.slice(2), 16) : parseInt(k.slice(1), 10);
    return code > 0 && code < 0x110000 ? String.fromCodePoint(code) : ' ';
  });
}

/** Text of an Office XML part: paragraph and cell ends become line breaks, tags go. */
function xmlText(xml) {
  return decodeXml(
    xml
      .replace(/<\/(w:p|a:p|text:p|text:h|table:table-cell|si|row)>/g, '\n')
      .replace(/<(w:tab|text:tab|w:br|text:line-break)\b[^>]*\/>/g, ' ')
      .replace(/<[^>]*>/g, ''),
  );
}

const OFFICE_PARTS = {
  docx: (n) => /^word\/(document|header\d*|footer\d*|footnotes|endnotes)\.xml$/.test(n),
  pptx: (n) => /^ppt\/(slides\/slide\d+|notesSlides\/notesSlide\d+)\.xml$/.test(n),
  xlsx: (n) => /^xl\/(sharedStrings|worksheets\/sheet\d+)\.xml$/.test(n),
  odf: (n) => n === 'content.xml',
};

async function office(kind, bytes, sink, limits) {
  let entries = 0;
  let total = 0;
  let tooBig = false;
  let files;
  try {
    files = unzipSync(bytes, {
      // Only the parts that hold text, and only while their declared sizes stay within the budget
      // (a zip bomb declares its sizes; a lying one inflates into a buffer of the declared size).
      filter: (f) => {
        if (++entries > limits.maxZipEntries) {
          tooBig = true;
          return false;
        }
        if (!OFFICE_PARTS[kind](f.name)) return false;
        total += f.originalSize;
        if (f.originalSize > limits.maxZipEntryBytes || total > limits.maxZipTotalBytes) {
          tooBig = true;
          return false;
        }
        return true;
      },
    });
  } catch (err) {
    return { status: 'broken', error: `not a readable ${kind.toUpperCase()} file (${err?.message ?? 'zip error'})` };
  }
  if (tooBig) return { status: 'too_large', error: 'the document expands past the extraction limit' };
  const names = Object.keys(files).sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
  if (!names.length) return { status: 'broken', error: `no ${kind.toUpperCase()} text parts found` };
  for (const name of names) sink.add(`${xmlText(decodeUtf8(files[name]))}\n`);
  return {};
}

async function extract(kind, bytes, limits) {
  const sink = new Sink(limits.maxTextChars);
  let extra = {};
  try {
    if (kind === 'text') await plain(bytes, sink);
    else if (kind === 'html') await html(bytes, sink);
    else if (kind === 'pdf') extra = (await pdf(bytes, sink, limits)) ?? {};
    else extra = (await office(kind, bytes, sink, limits)) ?? {};
  } catch (err) {
    if (!(err instanceof Done)) throw err;
  }
  if (extra.status) return { status: extra.status, error: extra.error, text: null, pages: extra.pages ?? null };
  const text = sink
    .text()
    .replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f\ufffd]/g, ' ')
    .replace(/[ \t]+/g, ' ')
    .replace(/\n\s*\n\s*\n+/g, '\n\n')
    .trim();
  return { status: text ? 'done' : 'empty', text: text || null, pages: extra.pages ?? null, truncated: sink.truncated };
}

parentPort.on('message', async (msg) => {
  try {
    const out = await extract(msg.kind, new Uint8Array(msg.bytes), msg.limits);
    parentPort.postMessage({ id: msg.id, ...out });
  } catch (err) {
    parentPort.postMessage({ id: msg.id, status: 'broken', text: null, pages: null, error: String(err?.message ?? err).slice(0, 300) });
  }
});
