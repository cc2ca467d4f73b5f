import { createHash } from 'node:crypto';
import { expect } from 'vitest';
import type { TestApp } from './harness.ts';

export function describeBytes(bytes: Buffer, filename = 'file.txt', contentType = 'text/plain') {
  return {
    filename,
    byte_size: bytes.length,
    checksum: createHash('md5').update(bytes).digest('base64'),
    content_type: contentType,
    sha256: createHash('sha256').update(bytes).digest('hex'),
  };
}

/** Steps 1 to 3 of a surface R upload; returns the save response. */
export async function uploadFile(app: TestApp, key: string, mailboxId: string, path: string, content: string | Buffer, extra: Record<string, unknown> = {}) {
  const bytes = Buffer.isBuffer(content) ? content : Buffer.from(content);
  const name = path.split('/').pop()!;
  const step1 = await app.request('POST', '/v1/direct_uploads', { key, body: { mailbox_id: mailboxId, path, blob: { ...describeBytes(bytes, name), purpose: 'mailbox_file' } } });
  if (step1.status === 200 && step1.body.data.skipped) return step1;
  expect(step1.status, step1.text).toBe(201);
  const put = await fetch(step1.body.data.direct_upload.url, { method: 'PUT', headers: step1.body.data.direct_upload.headers, body: new Uint8Array(bytes) });
  expect(put.status, await put.clone().text()).toBe(200);
  return app.request('POST', `/v1/mailboxes/${mailboxId}/files`, { key, body: { path, signed_blob_id: step1.body.data.signed_id, ...extra } });
}

export async function newMailbox(app: TestApp, key: string, title = `box ${Math.random().toString(36).slice(2, 8)}`) {
  const res = await app.request('POST', '/v1/mailboxes', { key, body: { mailbox: { title } } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.mailbox;
}
