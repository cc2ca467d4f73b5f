// One Content-Disposition for downloads, whoever serves them: S3 through a presigned URL's
// response-content-disposition, or our own endpoint for the fs store.

/** `attachment` with an ASCII fallback name and the exact name in UTF-8 (RFC 6266, RFC 8187). */
export function attachmentDisposition(filename: string): string {
  const fallback = filename.replace(/[^\x20-\x7e]|["\\%]/g, '_') || 'download';
  const encoded = encodeURIComponent(filename).replace(/['()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  return `attachment; filename="${fallback}"; filename*=UTF-8''${encoded}`;
}
