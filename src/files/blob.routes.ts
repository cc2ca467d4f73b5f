import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { parseRange } from '../http/range.ts';
import type { AppDeps } from '../context.ts';
import { AppError } from '../errors.ts';
import { signToken, verifyToken } from '../http/signed.ts';
import { findDirectUpload, storeUploadedBytes, UPLOAD_URL } from './direct-uploads.service.ts';
import { BlobMismatchError } from '../blobs/blob-store.ts';
import { attachmentDisposition } from '../blobs/content-disposition.ts';

// Byte transfer for the local blob store: the upload URL clients PUT to and the download
// links they GET. Neither takes an API key; each is a signed, expiring, single-purpose URL.

const DOWNLOAD = 'download-url';
export const DOWNLOAD_TTL_SECONDS = 900;

export interface DownloadLink {
  url: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  authentication: 'none';
  expires_in: number;
}

/** A download link in the shape clients expect (COMPAT.md). */
export async function downloadLink(deps: AppDeps, blob: { sha256: string; filename: string; contentType: string; byteSize: number }): Promise<DownloadLink> {
  const expiresIn = DOWNLOAD_TTL_SECONDS;
  const presigned = await deps.blobs.downloadUrl(blob.sha256, { filename: blob.filename, contentType: blob.contentType, expiresInSeconds: expiresIn });
  const url =
    presigned ??
    `${deps.publicUrl()}/blobs/downloads/${signToken(deps.secret, DOWNLOAD, { s: blob.sha256, n: blob.filename, t: blob.contentType, exp: deps.now().getTime() + expiresIn * 1000 })}`;
  return { url, filename: blob.filename, content_type: blob.contentType, size_bytes: blob.byteSize, authentication: 'none', expires_in: expiresIn };
}

export async function registerBlobRoutes(app: FastifyInstance, deps: AppDeps) {
  await app.register(async (scope) => {
    // Raw bodies: the upload handler streams the request itself and never buffers it.
    scope.removeAllContentTypeParsers();
    scope.addContentTypeParser('*', (_req, _payload, done) => done(null));

    scope.put('/blobs/uploads/:token', { schema: { hide: true }, config: { auth: false } }, async (req: FastifyRequest<{ Params: { token: string } }>, reply: FastifyReply) => {
      const payload = verifyToken<{ id: string }>(deps.secret, UPLOAD_URL, req.params.token, deps.now());
      const row = payload ? await findDirectUpload(deps.db, payload.id) : undefined;
      if (!row || row.status !== 'pending') throw new AppError('UPLOAD_URL_EXPIRED');
      const mismatch = (header: string, expected: string) => new AppError('UPLOAD_CHECKSUM_MISMATCH', `${header} must be exactly the header returned with the upload URL.`, { header, expected });
      const ct = String(req.headers['content-type'] ?? '');
      if (ct.replace(/\s+/g, '').toLowerCase() !== row.content_type.replace(/\s+/g, '').toLowerCase()) throw mismatch('Content-Type', row.content_type);
      if (req.headers['content-md5'] !== row.checksum) throw mismatch('Content-MD5', row.checksum);
      const declared = req.headers['content-length'];
      if (declared !== undefined && Number(declared) !== Number(row.byte_size)) {
        throw new AppError('UPLOAD_CHECKSUM_MISMATCH', 'Content-Length differs from the declared byte_size.', { which: 'byte_size', expected: Number(row.byte_size), actual: Number(declared) });
      }
      try {
        await storeUploadedBytes(deps, row, req.raw);
      } catch (err) {
        if (err instanceof BlobMismatchError) {
          // Drain what the client still sends so it reads our answer instead of a reset.
          req.raw.resume();
          throw new AppError('UPLOAD_CHECKSUM_MISMATCH', undefined, { which: err.which, expected: err.expected, actual: err.actual });
        }
        throw err;
      }
      return reply.code(200).header('etag', `"${Buffer.from(row.checksum, 'base64').toString('hex')}"`).send();
    });
  });

  app.get('/blobs/downloads/:token', { schema: { hide: true }, config: { auth: false } }, async (req: FastifyRequest<{ Params: { token: string } }>, reply: FastifyReply) => {
    const p = verifyToken<{ s: string; n: string; t: string }>(deps.secret, DOWNLOAD, req.params.token, deps.now());
    if (!p) throw new AppError('DOWNLOAD_LINK_INVALID');
    const size = await deps.blobs.size(p.s);
    if (size === null) throw new AppError('DOWNLOAD_LINK_INVALID', 'The content behind this link is gone.');
    const etag = `"${p.s}"`;
    reply
      .header('etag', etag)
      .header('accept-ranges', 'bytes')
      .header('cache-control', 'private, max-age=900, immutable')
      .header('x-content-type-options', 'nosniff')
      // The link itself is the credential: never pass it on as a Referer.
      .header('referrer-policy', 'no-referrer')
      // Never render user content as a page on the API origin.
      .header('content-security-policy', "sandbox; default-src 'none'")
      .header('content-disposition', attachmentDisposition(p.n))
      .type(p.t);
    if (req.headers['if-none-match'] === etag) return reply.code(304).send();
    const range = parseRange(req.headers.range, size);
    if (range === 'unsatisfiable') return reply.code(416).header('content-range', `bytes */${size}`).send();
    if (range) {
      reply.code(206).header('content-range', `bytes ${range.start}-${range.end}/${size}`).header('content-length', String(range.end - range.start + 1));
      return reply.send(await deps.blobs.read(p.s, range));
    }
    reply.header('content-length', String(size));
    return reply.send(size === 0 ? '' : await deps.blobs.read(p.s));
  });
}
