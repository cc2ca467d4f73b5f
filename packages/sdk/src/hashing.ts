import { md5 } from '@noble/hashes/legacy.js';
import { sha256 } from '@noble/hashes/sha2.js';
import { bytesToHex } from '@noble/hashes/utils.js';

// The service wants both checksums of every upload: MD5 (base64, the storage's Content-MD5)
// and SHA-256 (hex, its content address). Incremental, so streams never need to be held whole.
// Pure JavaScript (browsers have no MD5 in WebCrypto); the Node entry swaps in node:crypto.

export interface Digests {
  md5Base64: string;
  sha256Hex: string;
  size: number;
}

export interface Hasher {
  update(chunk: Uint8Array): void;
  digest(): Digests;
}

export type HasherFactory = () => Hasher;

export function toBase64(bytes: Uint8Array): string {
  let s = '';
  for (let i = 0; i < bytes.length; i += 0x8000) s += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(s);
}

export const jsHasher: HasherFactory = () => {
  const m = md5.create();
  const s = sha256.create();
  let size = 0;
  return {
    update(chunk) {
      m.update(chunk);
      s.update(chunk);
      size += chunk.length;
    },
    digest() {
      return { md5Base64: toBase64(m.digest()), sha256Hex: bytesToHex(s.digest()), size };
    },
  };
};

export function digestBytes(bytes: Uint8Array, factory: HasherFactory = jsHasher): Digests {
  const h = factory();
  h.update(bytes);
  return h.digest();
}
