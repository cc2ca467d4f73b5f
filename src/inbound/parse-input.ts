import type { Readable } from 'node:stream';

export type RawMessage = Buffer | Uint8Array | Readable | AsyncIterable<Uint8Array | string>;

export interface RawInput {
  /** At most `maxBytes` bytes of the message. */
  bytes: Buffer;
  /** True when the message was longer than `maxBytes` and only its start is in `bytes`. */
  cut: boolean;
}

function isAsyncIterable(x: unknown): x is AsyncIterable<Uint8Array | string> {
  return !!x && typeof (x as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';
}

/**
 * Reads at most `maxBytes` of the message. A stream (e.g. the stored blob) is consumed; when the
 * message is longer it is destroyed after the cap, so that a huge message is never held whole.
 * Rejects only when reading the stream fails (a storage fault, not a property of the message).
 */
export async function readRaw(raw: RawMessage, maxBytes: number): Promise<RawInput> {
  if (raw == null) return { bytes: Buffer.alloc(0), cut: false };
  if (raw instanceof Uint8Array) {
    const buf = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
    return buf.length > maxBytes ? { bytes: buf.subarray(0, maxBytes), cut: true } : { bytes: buf, cut: false };
  }
  if (!isAsyncIterable(raw)) return { bytes: Buffer.alloc(0), cut: false };
  const chunks: Buffer[] = [];
  let size = 0;
  let cut = false;
  for await (const chunk of raw) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk, 'latin1') : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    if (size + buf.length > maxBytes) {
      chunks.push(buf.subarray(0, maxBytes - size));
      size = maxBytes;
      cut = true;
      break;
    }
    chunks.push(buf);
    size += buf.length;
  }
  if (cut && typeof (raw as Readable).destroy === 'function') (raw as Readable).destroy();
  return { bytes: Buffer.concat(chunks, size), cut };
}
