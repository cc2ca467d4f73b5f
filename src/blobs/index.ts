import type { BlobConfig } from './blob-config.ts';
import type { BlobStore } from './blob-store.ts';
import { FsBlobStore } from './fs-store.ts';
import type { BlobWriterLog } from './blob-writer.ts';

export * from './blob-store.ts';
export { FsBlobStore } from './fs-store.ts';
export type { BlobConfig } from './blob-config.ts';
export { attachmentDisposition } from './content-disposition.ts';

/**
 * The store the configuration asks for: a local directory (default) or an S3 bucket. The S3 client
 * (AWS SDK, about 5 MB of heap) is loaded only for an S3 store: import S3BlobStore from
 * './s3-store.ts' directly, never through this module.
 */
export async function createBlobStore(config: { readonly blobs: BlobConfig }, log?: BlobWriterLog): Promise<BlobStore> {
  const c = config.blobs;
  if (c.kind === 'fs') return new FsBlobStore(c.dir, { writerThreads: c.writerThreads, log });
  const { S3BlobStore } = await import('./s3-store.ts');
  return new S3BlobStore({
    bucket: c.bucket,
    region: c.region,
    endpoint: c.endpoint,
    accessKeyId: c.accessKeyId,
    secretAccessKey: c.secretAccessKey,
    forcePathStyle: c.forcePathStyle,
    spoolDir: c.spoolDir,
  });
}
