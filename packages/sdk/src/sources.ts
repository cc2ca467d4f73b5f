import { digestBytes, type Digests, type HasherFactory, jsHasher } from './hashing.ts';

// What an upload reads from. A source can be hashed (both checksums, before the upload is
// declared) and opened (a fresh body for each PUT, so a retry re-reads it). The core knows
// bytes, strings and Blobs; the Node entry adds files on disk, read as streams.

export interface UploadSource {
  /** Both checksums and the size, computed now (a file is re-read if it changed since). */
  digests(): Promise<Digests>;
  /** A body for one PUT of exactly the bytes last hashed. */
  open(): Promise<Uint8Array | Blob | ReadableStream<Uint8Array>>;
  /** Content type to declare; the SDK guesses from the path when absent. */
  contentType?: string;
}

export type UploadInput = UploadSource | Uint8Array | ArrayBuffer | Blob | string | ReadableStream<Uint8Array>;

export function isUploadSource(v: unknown): v is UploadSource {
  return typeof v === 'object' && v !== null && typeof (v as UploadSource).digests === 'function' && typeof (v as UploadSource).open === 'function';
}

export function bytesSource(bytes: Uint8Array, hasher: HasherFactory = jsHasher, contentType?: string): UploadSource {
  let cached: Digests | null = null;
  return {
    contentType,
    async digests() {
      return (cached ??= digestBytes(bytes, hasher));
    },
    async open() {
      return bytes;
    },
  };
}

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    chunks.push(value);
    size += value.length;
  }
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}

/** Turns anything uploadable into a source. A stream is read once into memory (both checksums are needed before the PUT). */
export async function toSource(input: UploadInput, hasher: HasherFactory = jsHasher): Promise<UploadSource> {
  if (isUploadSource(input)) return input;
  if (typeof input === 'string') return bytesSource(new TextEncoder().encode(input), hasher, 'text/plain; charset=utf-8');
  if (input instanceof Uint8Array) return bytesSource(input, hasher);
  if (input instanceof ArrayBuffer) return bytesSource(new Uint8Array(input), hasher);
  if (typeof Blob !== 'undefined' && input instanceof Blob) return bytesSource(new Uint8Array(await input.arrayBuffer()), hasher, input.type || undefined);
  return bytesSource(await readAll(input as ReadableStream<Uint8Array>), hasher);
}

const TYPES: Record<string, string> = {
  txt: 'text/plain',
  md: 'text/markdown',
  html: 'text/html',
  htm: 'text/html',
  css: 'text/css',
  js: 'text/javascript',
  mjs: 'text/javascript',
  json: 'application/json',
  xml: 'application/xml',
  csv: 'text/csv',
  svg: 'image/svg+xml',
  png: 'image/png',
  jpg: 'image/jpeg',
  jpeg: 'image/jpeg',
  gif: 'image/gif',
  webp: 'image/webp',
  ico: 'image/x-icon',
  pdf: 'application/pdf',
  zip: 'application/zip',
  wasm: 'application/wasm',
  woff: 'font/woff',
  woff2: 'font/woff2',
  eml: 'message/rfc822',
  yaml: 'application/yaml',
  yml: 'application/yaml',
};

export function guessContentType(path: string): string {
  const ext = /\.([A-Za-z0-9]+)$/.exec(path)?.[1]?.toLowerCase();
  return (ext && TYPES[ext]) || 'application/octet-stream';
}
