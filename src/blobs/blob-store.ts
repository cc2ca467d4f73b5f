import type { Readable } from 'node:stream';

// File bytes are stored content-addressed by their SHA-256 (lower-case hex). Rows elsewhere refer to
// a blob by that hash; the store neither knows nor cares which files or emails use it. Two
// implementations (a local directory and S3) pass one contract suite: test/blob-store.test.ts.

/** What the caller expects of the bytes given to put(). Every field is optional; each given one is checked. */
export interface PutExpectation {
  /** Exact length in bytes. Reading stops as soon as more arrive. */
  byteSize?: number;
  /** MD5 of the bytes, base64 (as in a Content-MD5 header). */
  md5Base64?: string;
  /** SHA-256 of the bytes, hex (either case). */
  sha256Hex?: string;
  /** Upper bound for bytes of unknown length (an SMTP DATA stream). Reading stops as soon as it is exceeded. */
  maxBytes?: number;
}

/** A blob as stored: its address and the facts computed while it was written. */
export interface StoredBlob {
  /** Lower-case hex; the blob's address. */
  sha256: string;
  md5Base64: string;
  byteSize: number;
}

/** An inclusive byte range, like HTTP `Range: bytes=start-end`. */
export interface ByteRange {
  start: number;
  end: number;
}

export interface DirectUploadExpectation {
  byteSize: number;
  md5Base64: string;
  sha256Hex: string;
  contentType: string;
}

export interface DirectUploadTarget {
  url: string;
  /** Exactly the headers the client must send with its PUT (they are signed). */
  headers: Record<string, string>;
}

export interface BlobStore {
  readonly kind: 'fs' | 's3';

  /**
   * Streams `body` into the store, counting its size and computing MD5 and SHA-256 on the way; a
   * whole file is never held in memory.
   *
   * Rejects with {@link BlobMismatchError} when a given expectation fails or `maxBytes` is exceeded;
   * then nothing is stored. Reading stops as soon as `byteSize` or `maxBytes` is exceeded, and on
   * rejection the stream is left as it is (neither drained nor destroyed): the caller decides, e.g.
   * an SMTP handler drains it so that it can answer 552, an HTTP handler may close the connection.
   *
   * When it resolves the bytes are durable (fsynced on disk, or acknowledged by S3). Storing the same
   * content again, even concurrently, is harmless and resolves to the same {@link StoredBlob}.
   */
  put(body: Readable, expect?: PutExpectation): Promise<StoredBlob>;

  /** put() for small generated files already in memory. */
  putBuffer(bytes: Buffer): Promise<StoredBlob>;

  exists(sha256: string): Promise<boolean>;

  /** The blob's length in bytes, or null when it is not stored. */
  size(sha256: string): Promise<number | null>;

  /**
   * A stream of the blob's bytes, or of `range` (inclusive, like HTTP Range). An `end` past the last
   * byte is clamped. Throws {@link BlobNotFoundError} when the blob is not stored, and RangeError when
   * `start > end` or `start` is at or past the end of the blob.
   */
  read(sha256: string, range?: ByteRange): Promise<Readable>;

  /** Removes the blob; removing a missing blob is fine. Callers make sure no row still refers to it. */
  delete(sha256: string): Promise<void>;

  /** Every stored sha256, in no particular order (for garbage collection). */
  list(): AsyncIterable<string>;

  /**
   * Removes leftovers of writes a crash interrupted (the `*.part` temp files a put() streams into)
   * last changed before `before`. Returns how many were removed. (src/files/orphans.service.ts)
   */
  sweepTemp(before: Date): Promise<number>;

  /**
   * Removes the blob only when it was last written before `before`, for the sweeper of blobs no row
   * refers to: a put() of the same bytes writes it anew, so a blob about to be recorded is never
   * taken. Returns whether it was removed. The S3 store never removes here (a put of bytes already
   * in the bucket leaves the object as it was, so its age proves nothing): always false.
   */
  deleteIfWrittenBefore(sha256: string, before: Date): Promise<boolean>;

  /**
   * Where a client may PUT the bytes itself, or null when they must come through our own HTTP
   * endpoint (fs store). S3: a presigned PUT of the staging key for `uploadId`, valid for
   * `expiresInSeconds`, with the headers the client must send (Content-Type, Content-MD5 and
   * x-amz-checksum-sha256, all signed, so that S3 refuses other bytes).
   */
  directUploadTarget(uploadId: string, expect: DirectUploadExpectation, expiresInSeconds: number): Promise<DirectUploadTarget | null>;

  /**
   * After a client's PUT to {@link directUploadTarget}: verifies size and SHA-256 (streaming the staged
   * object when the store did not verify the checksum itself), moves it to its content address and
   * removes the staging object. Returns null when nothing has been uploaded yet (always, for fs).
   * Rejects with {@link BlobMismatchError} when the bytes are wrong, after removing them, so that
   * the client may upload again.
   */
  adoptDirectUpload(uploadId: string, expect: { byteSize: number; sha256Hex: string; md5Base64: string }): Promise<StoredBlob | null>;

  /**
   * A presigned GET URL (S3) that downloads the blob as an attachment named `filename`, or null (fs:
   * the bytes are served by our own endpoint). Does not check that the blob exists.
   */
  downloadUrl(sha256: string, opts: { filename: string; contentType: string; expiresInSeconds: number }): Promise<string | null>;
}

export type MismatchField = 'byte_size' | 'checksum' | 'sha256';

/**
 * The bytes were not what the caller said. `checksum` is the MD5. For sizes, `actual` is a lower
 * bound when reading stopped early. `tooLarge` is true when `maxBytes` was exceeded (then `which` is
 * 'byte_size' and `expected` is maxBytes): callers answer 413 / SMTP 552 rather than a mismatch.
 */
export class BlobMismatchError extends Error {
  override readonly name = 'BlobMismatchError';
  constructor(
    readonly which: MismatchField,
    readonly expected: string | number,
    readonly actual: string | number,
    readonly tooLarge = false,
  ) {
    super(tooLarge ? `blob is larger than ${expected} bytes` : `blob ${which} mismatch: expected ${expected}, got ${actual}`);
  }
}

export class BlobNotFoundError extends Error {
  override readonly name = 'BlobNotFoundError';
  constructor(readonly sha256: string) {
    super(`blob ${sha256} not found`);
  }
}

const SHA256_HEX = /^[0-9a-f]{64}$/;
const UPLOAD_ID = /^[A-Za-z0-9_-]{1,128}$/;

/** Guards every address before it becomes a path or key: a bad one is a programming error. */
export function assertSha256(sha256: string): void {
  if (!SHA256_HEX.test(sha256)) throw new TypeError(`not a lower-case hex SHA-256: ${JSON.stringify(sha256).slice(0, 80)}`);
}

export function isSha256(name: string): boolean {
  return SHA256_HEX.test(name);
}

export function assertUploadId(uploadId: string): void {
  if (!UPLOAD_ID.test(uploadId)) throw new TypeError('upload id must be 1-128 characters of A-Z a-z 0-9 _ -');
}

/** Validates a range against a blob of `size` bytes and clamps its end; RangeError when unsatisfiable. */
export function clampRange(range: ByteRange, size: number): ByteRange {
  const { start, end } = range;
  if (!Number.isSafeInteger(start) || !Number.isSafeInteger(end) || start < 0 || start > end) {
    throw new RangeError(`invalid byte range ${start}-${end}`);
  }
  if (start >= size) throw new RangeError(`byte range ${start}-${end} starts past the end of a ${size}-byte blob`);
  return { start, end: Math.min(end, size - 1) };
}
