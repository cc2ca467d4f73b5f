import { createHash } from 'node:crypto';
import fsp, { type FileHandle } from 'node:fs/promises';
import {
  AbortMultipartUploadCommand,
  CompleteMultipartUploadCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  type CompletedPart,
  type S3Client,
} from '@aws-sdk/client-s3';

const MAX_PARTS = 10_000;

export interface MultipartTarget {
  client: S3Client;
  bucket: string;
  key: string;
}

/**
 * Uploads a local file of `size` bytes as a multipart upload. Each of `concurrency` workers reads
 * parts from the file into its own buffer, so memory stays at concurrency × partSize whatever the
 * size; each part carries its Content-MD5 for S3 to verify, and is a Buffer, so the SDK may retry
 * it. On failure the upload is aborted, so that no parts are left to pay for.
 */
export async function uploadFileInParts(target: MultipartTarget, file: string, size: number, partSize: number, concurrency: number): Promise<void> {
  const { client, bucket: Bucket, key: Key } = target;
  const part = Math.max(partSize, Math.ceil(size / MAX_PARTS));
  const count = Math.ceil(size / part);
  const { UploadId } = await client.send(new CreateMultipartUploadCommand({ Bucket, Key, ContentType: 'application/octet-stream' }));
  if (!UploadId) throw new Error('S3 CreateMultipartUpload returned no UploadId');
  const fh = await fsp.open(file, 'r');
  const parts: CompletedPart[] = [];
  let next = 0;
  let failed = false;
  const worker = async () => {
    // One buffer per worker, reused: a part's send has settled before its buffer is refilled.
    const buf = Buffer.allocUnsafe(part);
    while (!failed && next < count) {
      const index = next++;
      const start = index * part;
      const body = await readAt(fh, buf, start, Math.min(part, size - start));
      const ContentMD5 = createHash('md5').update(body).digest('base64');
      const { ETag } = await client.send(new UploadPartCommand({ Bucket, Key, UploadId, PartNumber: index + 1, Body: body, ContentMD5 }));
      parts[index] = { PartNumber: index + 1, ETag };
    }
  };
  try {
    const results = await Promise.allSettled(
      Array.from({ length: Math.min(concurrency, count) }, () =>
        worker().catch((err: unknown) => {
          failed = true;
          throw err;
        }),
      ),
    );
    const rejected = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (rejected) throw rejected.reason;
    await client.send(new CompleteMultipartUploadCommand({ Bucket, Key, UploadId, MultipartUpload: { Parts: parts } }));
  } catch (err) {
    // Best effort: the upload's own error is the one to report; S3 lifecycle rules catch the rest.
    await client.send(new AbortMultipartUploadCommand({ Bucket, Key, UploadId })).catch(() => undefined);
    throw err;
  } finally {
    await fh.close();
  }
}

async function readAt(fh: FileHandle, buf: Buffer, position: number, length: number): Promise<Buffer> {
  let offset = 0;
  while (offset < length) {
    const { bytesRead } = await fh.read(buf, offset, length - offset, position + offset);
    if (bytesRead === 0) throw new Error(`spool file ended at ${position + offset} of ${position + length}`);
    offset += bytesRead;
  }
  return buf.subarray(0, length);
}
