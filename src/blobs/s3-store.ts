import { randomUUID } from 'node:crypto';
import fsp from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from '@aws-sdk/client-s3';
import { getSignedUrl } from '@aws-sdk/s3-request-presigner';
import {
  assertSha256,
  assertUploadId,
  BlobMismatchError,
  BlobNotFoundError,
  clampRange,
  isSha256,
  type BlobStore,
  type ByteRange,
  type DirectUploadExpectation,
  type DirectUploadTarget,
  type PutExpectation,
  type StoredBlob,
} from './blob-store.ts';
import { attachmentDisposition } from './content-disposition.ts';
import { uploadFileInParts } from './s3-multipart.ts';
import { checkExpectation, hashStream, spoolToFile } from './spool.ts';
import { sweepPartFiles } from './fs-store.ts';

export interface S3BlobStoreOptions {
  bucket: string;
  region: string;
  /** For S3-compatible services (MinIO, R2, s3rver); omit for AWS. */
  endpoint?: string;
  /** Both or neither; without them the AWS SDK's default credential chain applies (e.g. an instance role). */
  accessKeyId?: string;
  secretAccessKey?: string;
  forcePathStyle: boolean;
  /** Local directory where put() spools a body while hashing it, before anything reaches S3. */
  spoolDir: string;
  /** Bodies up to this size go up in one PutObject, larger ones as a multipart upload of parts this size. Default 8 MiB. */
  partSize?: number;
  /** Parts of one multipart upload sent at once (each held in memory while it is sent). Default 2. */
  uploadConcurrency?: number;
}

const MIB = 1024 * 1024;
const MAX_PRESIGN_SECONDS = 7 * 24 * 3600;

/**
 * Blobs in an S3 bucket under `blobs/<sha256>`; direct uploads are staged under `staging/<uploadId>`.
 *
 * put() first spools the body to a local temp file while hashing it, so a mismatch or an oversized
 * body is refused before anything reaches S3. Then one PutObject up to `partSize` (with Content-MD5
 * and x-amz-checksum-sha256 for S3 to verify), else a multipart upload read from the spool file part
 * by part (each with its Content-MD5): memory stays at about partSize × uploadConcurrency per put,
 * whatever the size. The local disk needs room for the bodies in flight.
 *
 * Checksums: the client is built with `requestChecksumCalculation: 'WHEN_REQUIRED'`, because the
 * SDK's default CRC32 trailers (aws-chunked encoding) are not understood by many S3-compatible
 * services; we compute and check our own MD5 and SHA-256 instead.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3' as const;
  readonly client: S3Client;
  private readonly bucket: string;
  private readonly spoolDir: string;
  private readonly partSize: number;
  private readonly uploadConcurrency: number;
  private spoolReady: Promise<unknown> | undefined;

  constructor(opts: S3BlobStoreOptions) {
    this.bucket = opts.bucket;
    this.spoolDir = path.resolve(opts.spoolDir);
    this.partSize = Math.max(5 * MIB, opts.partSize ?? 8 * MIB);
    this.uploadConcurrency = Math.max(1, opts.uploadConcurrency ?? 2);
    this.client = new S3Client({
      region: opts.region,
      endpoint: opts.endpoint,
      forcePathStyle: opts.forcePathStyle,
      credentials: opts.accessKeyId && opts.secretAccessKey ? { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } : undefined,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
    });
  }

  put(body: Readable, expect: PutExpectation = {}): Promise<StoredBlob> {
    return this.store(body, expect);
  }

  putBuffer(bytes: Buffer): Promise<StoredBlob> {
    return this.store(Readable.from([bytes]), { byteSize: bytes.length });
  }

  /** put() and putBuffer() (neither calls the other: the app counts the bytes of each once). */
  private async store(body: Readable, expect: PutExpectation): Promise<StoredBlob> {
    this.spoolReady ??= fsp.mkdir(this.spoolDir, { recursive: true, mode: 0o700 }).catch((err: unknown) => {
      this.spoolReady = undefined;
      throw err;
    });
    await this.spoolReady;
    const tmp = path.join(this.spoolDir, `${randomUUID()}.part`);
    const blob = await spoolToFile(body, expect, tmp, { fsync: false });
    try {
      // Same content already there: nothing to upload (content addressing makes this safe).
      if ((await this.size(blob.sha256)) !== blob.byteSize) await this.upload(tmp, blob);
      return blob;
    } finally {
      await fsp.rm(tmp, { force: true });
    }
  }

  async exists(sha256: string): Promise<boolean> {
    return (await this.size(sha256)) !== null;
  }

  async size(sha256: string): Promise<number | null> {
    assertSha256(sha256);
    return this.headSize(blobKey(sha256));
  }

  async read(sha256: string, range?: ByteRange): Promise<Readable> {
    assertSha256(sha256);
    const r = range ? clampRange(range, Number.MAX_SAFE_INTEGER) : undefined;
    try {
      const res = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: blobKey(sha256), Range: r ? `bytes=${r.start}-${r.end}` : undefined }),
      );
      if (!(res.Body instanceof Readable)) throw new Error('S3 GetObject returned no Node stream');
      return res.Body;
    } catch (err) {
      if (isMissing(err)) throw new BlobNotFoundError(sha256);
      if (errorName(err) === 'InvalidRange' || httpStatus(err) === 416) throw new RangeError(`byte range ${r?.start}-${r?.end} is past the end of blob ${sha256}`);
      throw err;
    }
  }

  async delete(sha256: string): Promise<void> {
    assertSha256(sha256);
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: blobKey(sha256) }));
  }

  async *list(): AsyncIterable<string> {
    let token: string | undefined;
    do {
      const page = await this.client.send(new ListObjectsV2Command({ Bucket: this.bucket, Prefix: 'blobs/', ContinuationToken: token }));
      for (const obj of page.Contents ?? []) {
        const name = obj.Key?.slice('blobs/'.length);
        if (name && isSha256(name)) yield name;
      }
      token = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (token);
  }

  /** Spooled bodies a crash left in the local spool directory. */
  async sweepTemp(before: Date): Promise<number> {
    return sweepPartFiles(this.spoolDir, before, /\.part$/);
  }

  /** Never: see BlobStore.deleteIfWrittenBefore (a bucket lifecycle rule or an audit handles S3). */
  async deleteIfWrittenBefore(sha256: string): Promise<boolean> {
    assertSha256(sha256);
    return false;
  }

  async directUploadTarget(uploadId: string, expect: DirectUploadExpectation, expiresInSeconds: number): Promise<DirectUploadTarget> {
    assertUploadId(uploadId);
    const expiresIn = presignSeconds(expiresInSeconds);
    const headers: Record<string, string> = {
      'Content-Type': expect.contentType,
      'Content-MD5': expect.md5Base64,
      'x-amz-checksum-sha256': hexToBase64(expect.sha256Hex),
    };
    const command = new PutObjectCommand({
      Bucket: this.bucket,
      Key: stagingKey(uploadId),
      ContentType: headers['Content-Type'],
      ContentMD5: headers['Content-MD5'],
      ChecksumSHA256: headers['x-amz-checksum-sha256'],
    });
    // Keep all three as signed headers (not query parameters), so S3 refuses any other bytes.
    const url = await getSignedUrl(this.client, command, {
      expiresIn,
      signableHeaders: new Set(['content-type', 'content-md5']),
      unhoistableHeaders: new Set(['x-amz-checksum-sha256']),
    });
    const signed = new Set((new URL(url).searchParams.get('X-Amz-SignedHeaders') ?? '').split(';'));
    for (const name of Object.keys(headers)) {
      if (!signed.delete(name.toLowerCase())) throw new Error(`presigned PUT does not sign ${name}`);
    }
    signed.delete('host');
    if (signed.size) throw new Error(`presigned PUT signs unexpected headers: ${[...signed].join(', ')}`);
    return { url, headers };
  }

  async adoptDirectUpload(uploadId: string, expect: { byteSize: number; sha256Hex: string; md5Base64: string }): Promise<StoredBlob | null> {
    assertUploadId(uploadId);
    const key = stagingKey(uploadId);
    let head;
    try {
      head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key, ChecksumMode: 'ENABLED' }));
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
    let blob: StoredBlob;
    try {
      const sha256 = expect.sha256Hex.toLowerCase();
      checkExpectation({ byteSize: expect.byteSize }, { sha256, md5Base64: expect.md5Base64, byteSize: head.ContentLength ?? -1 });
      if (head.ChecksumSHA256 === hexToBase64(sha256)) {
        // S3 checked the signed x-amz-checksum-sha256 and Content-MD5 headers against the bytes.
        blob = { sha256, md5Base64: expect.md5Base64, byteSize: expect.byteSize };
      } else {
        // The store kept no verified checksum (s3rver and some S3-compatible services): read and hash.
        const res = await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: key }));
        if (!(res.Body instanceof Readable)) throw new Error('S3 GetObject returned no Node stream');
        blob = await hashStream(res.Body);
        checkExpectation(expect, blob);
      }
    } catch (err) {
      // Wrong bytes: remove them so that the client can upload again (not on a transient failure).
      if (err instanceof BlobMismatchError) await this.deleteKey(key);
      throw err;
    }
    if ((await this.size(blob.sha256)) !== blob.byteSize) {
      try {
        await this.client.send(
          new CopyObjectCommand({
            Bucket: this.bucket,
            Key: blobKey(blob.sha256),
            CopySource: `${this.bucket}/${key}`,
            MetadataDirective: 'REPLACE',
            ContentType: 'application/octet-stream',
          }),
        );
      } catch (err) {
        // A concurrent adopt of the same upload may have moved it first.
        if (!isMissing(err) || (await this.size(blob.sha256)) !== blob.byteSize) throw err;
      }
    }
    await this.deleteKey(key);
    return blob;
  }

  async downloadUrl(sha256: string, opts: { filename: string; contentType: string; expiresInSeconds: number }): Promise<string> {
    assertSha256(sha256);
    const command = new GetObjectCommand({
      Bucket: this.bucket,
      Key: blobKey(sha256),
      ResponseContentType: opts.contentType,
      ResponseContentDisposition: attachmentDisposition(opts.filename),
    });
    return getSignedUrl(this.client, command, { expiresIn: presignSeconds(opts.expiresInSeconds) });
  }

  /** Releases the client's sockets. */
  close(): void {
    this.client.destroy();
  }

  private async upload(file: string, blob: StoredBlob): Promise<void> {
    const Key = blobKey(blob.sha256);
    if (blob.byteSize <= this.partSize) {
      // Small enough to hold: a Buffer body can be retried by the SDK, a stream could not.
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key,
          Body: await fsp.readFile(file),
          ContentType: 'application/octet-stream',
          ContentMD5: blob.md5Base64,
          ChecksumSHA256: hexToBase64(blob.sha256),
        }),
      );
      return;
    }
    await uploadFileInParts({ client: this.client, bucket: this.bucket, key: Key }, file, blob.byteSize, this.partSize, this.uploadConcurrency);
  }

  private async headSize(key: string): Promise<number | null> {
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: key }));
      return head.ContentLength ?? null;
    } catch (err) {
      if (isMissing(err)) return null;
      throw err;
    }
  }

  private async deleteKey(key: string): Promise<void> {
    await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: key }));
  }
}

const blobKey = (sha256: string) => `blobs/${sha256}`;
const stagingKey = (uploadId: string) => `staging/${uploadId}`;

function hexToBase64(hex: string): string {
  if (!/^[0-9a-fA-F]{64}$/.test(hex)) throw new TypeError('sha256Hex must be 64 hex digits');
  return Buffer.from(hex, 'hex').toString('base64');
}

function presignSeconds(seconds: number): number {
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > MAX_PRESIGN_SECONDS) {
    throw new RangeError(`expiresInSeconds must be an integer from 1 to ${MAX_PRESIGN_SECONDS}`);
  }
  return seconds;
}

function errorName(err: unknown): string | undefined {
  return (err as { name?: string } | undefined)?.name;
}

function httpStatus(err: unknown): number | undefined {
  return (err as { $metadata?: { httpStatusCode?: number } } | undefined)?.$metadata?.httpStatusCode;
}

/** A missing key (never a missing bucket, which is a configuration error to surface). */
function isMissing(err: unknown): boolean {
  const name = errorName(err);
  if (name === 'NoSuchBucket') return false;
  return name === 'NotFound' || name === 'NoSuchKey' || httpStatus(err) === 404;
}
