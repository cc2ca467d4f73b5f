import { expect } from 'vitest';
import type { TestApp, TestUser } from './harness.ts';
import { smtpDialogue } from './smtp-helpers.ts';

// Small helpers for the address, alias, allowlist and custom-domain tests.

/** The server's reply to RCPT TO for one address (after EHLO and MAIL FROM). */
export async function rcpt(app: TestApp, address: string, from = 'sender@example.com'): Promise<string> {
  const r = await smtpDialogue(app, ['EHLO client.example', `MAIL FROM:<${from}>`, `RCPT TO:<${address}>`, 'QUIT']);
  return r[3]!;
}

export async function settings(app: TestApp, key: string, mailboxId: string) {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/email`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

export async function inboundEmail(app: TestApp, key: string, bucketId: string) {
  const res = await app.request('GET', `/api/v1/buckets/${bucketId}/inbound_email`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data;
}

export function rotate(app: TestApp, key: string, mailboxId: string, body: Record<string, unknown>) {
  return app.request('POST', `/v1/mailboxes/${mailboxId}/email/rotate`, { key, body: { confirm: true, ...body } });
}

export function rotateA(app: TestApp, key: string, bucketId: string, body: Record<string, unknown>) {
  return app.request('POST', `/api/v1/buckets/${bucketId}/inbound_email/rotate`, { key, body: { confirm: true, ...body } });
}

/** Runs every due job (activations, DNS checks) now. */
export async function drain(app: TestApp): Promise<void> {
  await app.started.deps.jobs.worker!.drain();
}

/** Received emails of a mailbox, newest first. */
export async function received(app: TestApp, user: TestUser, mailboxId: string) {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/emails`, { key: user.key });
  expect(res.status, res.text).toBe(200);
  return res.body.data.emails as { id: string; delivered_to: string; subject: string }[];
}

export function expectError(res: { status: number; body: any; text: string }, status: number, code: string) {
  expect(res.status, res.text).toBe(status);
  expect(res.body.error.code, res.text).toBe(code);
}

