import { Readable } from 'node:stream';
import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { compiledQuery } from '../db/compiled-query.ts';
import { clampRange, type BlobStore, type ByteRange, type PutExpectation, type StoredBlob } from './blob-store.ts';
import { checkedChunks, checkExpectation } from './spool.ts';
import { digestBlob } from './digest.ts';

// Small blobs kept in the database, in the `blobs` row that records them (migration 0029).
//
// Received mail is mostly small: a 5 KiB message is two blobs of a few KiB (message.eml and
// message.json). Written to the store, each costs a write with O_DSYNC, a rename and a directory
// fsync, and the commit that records the message waits for them. Kept in its row, a blob is written
// by that commit, within the one WAL sync the commit makes anyway, and is durable exactly when the
// message is. Writers opt in (received mail and uploads to Cubby's own endpoint do, up to
// CUBBY_BLOB_INLINE_MAX_BYTES): put() and putBuffer() still write to the store, because their
// callers record the row later, without the bytes.
//
// Readers do not know the difference: the app's BlobStore (InlineAwareBlobStore) looks for a
// blob's bytes in its row first, then in the store. Removing a blob's row removes its bytes; the
// blob collector then deletes it from the store too, which for an inline blob finds nothing.

const INLINE_BYTES = compiledQuery(
  (db, sha256: string) => db.selectFrom('blobs').select('inline_bytes').where('sha256', '=', sha256).where('inline_bytes', 'is not', null),
  1,
);

/** The bytes of a blob kept in its row, or null when the row has none (or there is no row). */
export async function inlineBytes(db: Kysely<DB>, sha256: string): Promise<Buffer | null> {
  const row = await INLINE_BYTES.executeTakeFirst(db, sha256);
  return row?.inline_bytes ?? null;
}

/**
 * The blob store as the app sees it: reads find inline blobs in the database, everything else goes
 * to the configured store. Only reads need the database; writes, deletes and listings are the
 * store's (an inline blob's bytes go and come with its row).
 */
export class InlineAwareBlobStore implements BlobStore {
  readonly kind: BlobStore['kind'];

  constructor(
    private readonly db: Kysely<DB>,
    /** The configured store (fs or S3), where every blob not kept in its row is. */
    readonly store: BlobStore,
  ) {
    this.kind = store.kind;
  }

  put: BlobStore['put'] = (body, expect) => this.store.put(body, expect);
  putBuffer: BlobStore['putBuffer'] = (bytes) => this.store.putBuffer(bytes);
  delete: BlobStore['delete'] = (sha256) => this.store.delete(sha256);
  list: BlobStore['list'] = () => this.store.list();
  sweepTemp: BlobStore['sweepTemp'] = (before) => this.store.sweepTemp(before);
  deleteIfWrittenBefore: BlobStore['deleteIfWrittenBefore'] = (sha256, before) => this.store.deleteIfWrittenBefore(sha256, before);
  directUploadTarget: BlobStore['directUploadTarget'] = (uploadId, expect, ttl) => this.store.directUploadTarget(uploadId, expect, ttl);
  adoptDirectUpload: BlobStore['adoptDirectUpload'] = (uploadId, expect) => this.store.adoptDirectUpload(uploadId, expect);

  async exists(sha256: string): Promise<boolean> {
    return (await inlineBytes(this.db, sha256)) !== null || this.store.exists(sha256);
  }

  async size(sha256: string): Promise<number | null> {
    const bytes = await inlineBytes(this.db, sha256);
    return bytes ? bytes.byteLength : this.store.size(sha256);
  }

  async read(sha256: string, range?: ByteRange): Promise<Readable> {
    const bytes = await inlineBytes(this.db, sha256);
    if (!bytes) return this.store.read(sha256, range);
    if (!range) return Readable.from([bytes], { objectMode: false });
    const { start, end } = clampRange(range, bytes.byteLength);
    return Readable.from([bytes.subarray(start, end + 1)], { objectMode: false });
  }

  /** An inline blob has no object of its own to sign a link to: null, so that our endpoint serves it. */
  async downloadUrl(sha256: string, opts: Parameters<BlobStore['downloadUrl']>[1]): Promise<string | null> {
    if ((await inlineBytes(this.db, sha256)) !== null) return null;
    return this.store.downloadUrl(sha256, opts);
  }
}

/**
 * The blobs of one commit that records them (received mail): each small one is kept for its row,
 * each larger one written to the store at once. `inline` is what the commit writes into the rows.
 */
export class BlobsForCommit {
  readonly inline = new Map<string, Buffer>();

  constructor(
    private readonly store: BlobStore,
    /** CUBBY_BLOB_INLINE_MAX_BYTES; below 0 nothing is kept inline. */
    private readonly inlineMaxBytes: number,
  ) {}

  /** Whether bytes of this size are kept in their row. */
  keeps(byteSize: number): boolean {
    return byteSize <= this.inlineMaxBytes;
  }

  /** Stores `bytes`; `digest` saves hashing them again when it is known already (from the analysis thread). */
  async put(bytes: Buffer, digest?: StoredBlob | null): Promise<StoredBlob> {
    if (!this.keeps(bytes.byteLength)) return this.store.putBuffer(bytes);
    const blob = digest ?? digestBlob(bytes);
    this.inline.set(blob.sha256, bytes);
    return blob;
  }
}

/**
 * Reads a small body of a known size into memory and checks it as the store's put() would (the
 * same errors in the same order: too long while reading, then size, MD5 and SHA-256), for bytes
 * to be kept in their row. Reading stops as soon as the body is longer than `byteSize`, and the
 * stream is then left as it is, as put() leaves it.
 */
export async function readSmallBlob(body: Readable, expect: PutExpectation & { byteSize: number }): Promise<{ blob: StoredBlob; bytes: Buffer }> {
  const chunks: Buffer[] = [];
  for await (const buf of checkedChunks(body, expect)) chunks.push(buf);
  const bytes = Buffer.concat(chunks);
  const blob = digestBlob(bytes);
  checkExpectation(expect, blob);
  return { blob, bytes };
}
