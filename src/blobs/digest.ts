import { createHash } from 'node:crypto';
import type { StoredBlob } from './blob-store.ts';

/**
 * The address and checksums of bytes in memory (one buffer, or the chunks of one body): what a
 * store's put() computes, and what bytes kept in their database row get (src/blobs/inline-blobs.ts).
 * A module of its own: the analysis thread computes them for received mail and should load nothing
 * else of the blob code.
 */
export function digestBlob(bytes: Uint8Array | readonly Uint8Array[]): StoredBlob {
  const sha = createHash('sha256');
  const md5 = createHash('md5');
  let byteSize = 0;
  for (const chunk of bytes instanceof Uint8Array ? [bytes] : bytes) {
    sha.update(chunk);
    md5.update(chunk);
    byteSize += chunk.byteLength;
  }
  return { sha256: sha.digest('hex'), md5Base64: md5.digest('base64'), byteSize };
}
