import { monotonicFactory } from 'ulid';
import { createHash, randomBytes, randomFillSync } from 'node:crypto';

// Prefixed ULIDs: sortable by creation and checkable by clients with ^<prefix>[A-Za-z0-9]+$.
// The random part comes from crypto random bytes drawn 4 KiB at a time: ulid's default source
// asks the kernel for one byte per character (16 calls per id), a visible cost on busy paths.
// Each draw from OpenSSL costs several microseconds however few bytes it gives (more on a
// virtual machine), so small random values are cut from this pool instead.
const pool = Buffer.alloc(4096);
let drawn = pool.length;
function pooledByte(): number {
  if (drawn === pool.length) {
    randomFillSync(pool);
    drawn = 0;
  }
  return pool[drawn++]!;
}
const ulid = monotonicFactory(() => pooledByte() / 256);
export type IdPrefix = 'acct' | 'usr' | 'key' | 'mem' | 'act' | 'req' | 'ses' | 'bkt' | 'bktrv' | 'df' | 'dfv' | 'eml' | 'bus' | 'job' | 'evt' | 'adr' | 'mbc' | 'du' | 'busf' | 'asg' | 'dom' | 'rot' | 'dsr';

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid()}`;
}

const BASE32 = '0123456789abcdefghijklmnopqrstuv';
/**
 * A random label for logs (an SMTP session's id): 5 bits of crypto randomness per character,
 * from the pool above. Not a secret: tokens use randomToken.
 */
export function randomLabel(length = 16): string {
  let out = '';
  for (let i = 0; i < length; i++) out += BASE32[pooledByte() & 31];
  return out;
}

const BASE62 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
/** Uniformly random base62 string (rejection sampling, no modulo bias). */
export function randomToken(length: number, alphabet = BASE62): string {
  let out = '';
  const limit = 256 - (256 % alphabet.length);
  while (out.length < length) {
    for (const b of randomBytes(length * 2)) {
      if (b < limit) out += alphabet[b % alphabet.length];
      if (out.length === length) break;
    }
  }
  return out;
}

export function sha256Hex(value: string | Buffer): string {
  return createHash('sha256').update(value).digest('hex');
}
