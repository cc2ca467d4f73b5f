import path from 'node:path';
import { z } from 'zod';

// The blob store's settings, read from CUBBY_* variables as part of the one config schema in
// src/config.ts (spread `blobEnvShape` into its z.object and pass it through `withBlobEnvChecks`),
// or on their own with `parseBlobEnv` (tests, tools).

const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'], { message: 'must be true or false' })
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

/** Received messages up to this size are held in memory whole anyway (src/inbound/receive.ts). */
const MAX_INLINE_BYTES = 1024 * 1024;
/**
 * Most mail without large attachments. Below about 100 KB SQLite reads and writes a blob faster in
 * its file than the file system does as a file of its own, and at 100 KiB a received message took
 * 5-6 ms of CPU kept in its row against 7-8 ms in the store (docs/bench-smtp.md).
 */
const DEFAULT_INLINE_BYTES = 128 * 1024;

export const blobEnvShape = {
  CUBBY_BLOB_STORE: z.enum(['fs', 's3']).default('fs'),
  /** fs store directory; default `<CUBBY_DATA_DIR>/blobs`. */
  CUBBY_BLOB_DIR: z.string().min(1).optional(),
  /** fs store: threads that write small blobs (src/blobs/blob-writer.ts); 0 writes them from the event loop. */
  CUBBY_BLOB_WRITER_THREADS: z.string().regex(/^(1[0-6]|\d)$/, 'must be a whole number of threads (0-16)').transform(Number).default(2),
  /**
   * Blobs of at most this many bytes that received mail stores (message.eml, message.json, small
   * attachments), and uploads of that size, are kept in the database with their row instead of the
   * store (src/blobs/inline-blobs.ts); 0 keeps every blob in the store.
   */
  CUBBY_BLOB_INLINE_MAX_BYTES: z
    .string()
    .regex(/^\d{1,7}$/, 'must be a whole number of bytes (0-1048576)')
    .transform(Number)
    .refine((n) => n <= MAX_INLINE_BYTES, 'must be at most 1048576 (1 MiB)')
    .default(DEFAULT_INLINE_BYTES),
  CUBBY_S3_BUCKET: z
    .string()
    .regex(/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/, 'must be an S3 bucket name (3-63 of a-z 0-9 . -)')
    .optional(),
  CUBBY_S3_REGION: z.string().regex(/^[a-z0-9-]{1,64}$/, 'must be a region name such as us-east-1').default('us-east-1'),
  CUBBY_S3_ENDPOINT: z.url({ protocol: /^https?$/, message: 'must be an http(s) URL' }).optional(),
  CUBBY_S3_ACCESS_KEY_ID: z.string().min(1).optional(),
  CUBBY_S3_SECRET_ACCESS_KEY: z.string().min(1).optional(),
  CUBBY_S3_FORCE_PATH_STYLE: bool.default(false),
};

export type BlobEnv = z.infer<z.ZodObject<typeof blobEnvShape>>;

export type BlobConfig =
  | { readonly kind: 'fs'; readonly dir: string; readonly writerThreads: number; readonly inlineMaxBytes: number }
  | {
      readonly kind: 's3';
      readonly inlineMaxBytes: number;
      readonly bucket: string;
      readonly region: string;
      readonly endpoint: string | undefined;
      readonly accessKeyId: string | undefined;
      readonly secretAccessKey: string | undefined;
      readonly forcePathStyle: boolean;
      /** Local directory where put() spools bodies before upload: `<CUBBY_DATA_DIR>/tmp/blob-spool`. */
      readonly spoolDir: string;
    };

type Raw = Record<string, unknown>;

/**
 * Adds the checks that span several variables. They run even when another variable is invalid
 * (zod's `when`), so that start-up lists every problem at once; hence they read raw values.
 */
export function withBlobEnvChecks<T extends z.ZodType<Raw>>(schema: T) {
  const always = { when: () => true };
  return schema
    .refine((e: Raw) => e.CUBBY_BLOB_STORE !== 's3' || typeof e.CUBBY_S3_BUCKET === 'string', {
      ...always,
      path: ['CUBBY_S3_BUCKET'],
      message: 'is required when CUBBY_BLOB_STORE=s3',
    })
    .refine((e: Raw) => (e.CUBBY_S3_ACCESS_KEY_ID === undefined) === (e.CUBBY_S3_SECRET_ACCESS_KEY === undefined), {
      ...always,
      path: ['CUBBY_S3_SECRET_ACCESS_KEY'],
      message: 'set CUBBY_S3_ACCESS_KEY_ID and CUBBY_S3_SECRET_ACCESS_KEY together, or neither (then the AWS default credential chain applies)',
    });
}

/** Builds the frozen blob config from parsed variables; `dataDir` is already absolute. */
export function blobConfigFromEnv(e: BlobEnv, dataDir: string): BlobConfig {
  if (e.CUBBY_BLOB_STORE === 'fs') {
    return Object.freeze({
      kind: 'fs',
      dir: path.resolve(e.CUBBY_BLOB_DIR ?? path.join(dataDir, 'blobs')),
      writerThreads: e.CUBBY_BLOB_WRITER_THREADS,
      inlineMaxBytes: e.CUBBY_BLOB_INLINE_MAX_BYTES,
    });
  }
  if (!e.CUBBY_S3_BUCKET) throw new Error('CUBBY_S3_BUCKET: is required when CUBBY_BLOB_STORE=s3');
  return Object.freeze({
    kind: 's3',
    inlineMaxBytes: e.CUBBY_BLOB_INLINE_MAX_BYTES,
    bucket: e.CUBBY_S3_BUCKET,
    region: e.CUBBY_S3_REGION,
    endpoint: e.CUBBY_S3_ENDPOINT?.replace(/\/+$/, ''),
    accessKeyId: e.CUBBY_S3_ACCESS_KEY_ID,
    secretAccessKey: e.CUBBY_S3_SECRET_ACCESS_KEY,
    forcePathStyle: e.CUBBY_S3_FORCE_PATH_STYLE,
    spoolDir: path.join(dataDir, 'tmp', 'blob-spool'),
  });
}

const blobEnvSchema = withBlobEnvChecks(z.object(blobEnvShape));

/**
 * Parses only the blob variables (empty values count as unset, as in loadConfig). Throws an Error
 * listing every problem.
 */
export function parseBlobEnv(env: Record<string, string | undefined>, dataDir: string): BlobConfig {
  const picked = Object.fromEntries(Object.entries(env).filter(([k, v]) => k in blobEnvShape && v !== ''));
  const parsed = blobEnvSchema.safeParse(picked);
  if (!parsed.success) {
    throw new Error(`Invalid blob store configuration:\n${parsed.error.issues.map((i) => `  - ${i.path.join('.')}: ${i.message}`).join('\n')}`);
  }
  return blobConfigFromEnv(parsed.data as BlobEnv, path.resolve(dataDir));
}
