import { createHash } from 'node:crypto';
import type { StoredBlob } from './blob-store.ts';

/**
 * The address and checksums a store's put() computes, for bytes kept in their database row instead
 * (src/blobs/inline-blobs.ts). A module of its own: the analysis thread computes them for received
 * mail and should load nothing else of the blob code.
 */
export function digestBlob(bytes: Uint8Array): StoredBlob {
  return {
    sha256: createHash('sha256').update(bytes).digest('hex'),
    md5Base64: createHash('md5').update(bytes).digest('base64'),
    byteSize: bytes.byteLength,
  };
}
