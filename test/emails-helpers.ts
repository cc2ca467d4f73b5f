import { expect } from 'vitest';
import type { TestApp, TestUser } from './harness.ts';
import { newMailbox } from './files-helpers.ts';
import { sendMail, type SendOptions } from './smtp-helpers.ts';

// Mail for the emails API tests arrives the real way: over SMTP to the app's listener.

export const GTUBE = 'XJS*C4JDBQADN1.NSBN3*2IDNEN*GTUBE-STANDARD-ANTI-UBE-TEST-EMAIL*C.34X';

export interface Box {
  id: string;
  address: string;
}

export async function inbox(app: TestApp, user: TestUser): Promise<Box> {
  const m = await newMailbox(app, user.key);
  return { id: m.id, address: m.email.address };
}

/** Sends one message to the mailbox and returns the `eml_` id the server answered with. */
export async function receive(app: TestApp, box: Box, opts: Partial<SendOptions> = {}): Promise<string> {
  const r = await sendMail(app, { to: box.address, ...opts });
  expect(r.rejected).toEqual([]);
  expect(r.emailIds).toHaveLength(1);
  return r.emailIds[0]!;
}

export function emailsPath(box: Box | string, ...rest: string[]): string {
  const id = typeof box === 'string' ? box : box.id;
  return [`/v1/mailboxes/${id}/emails`, ...rest].join('/');
}

export async function list(app: TestApp, key: string, box: Box, query: Record<string, string | number | boolean | undefined> = {}) {
  const res = await app.request('GET', emailsPath(box), { key, query });
  expect(res.status, res.text).toBe(200);
  return res.body.data as { emails: any[]; pagination: { limit: number; has_more: boolean; next_cursor: string | null } };
}

export async function ids(app: TestApp, key: string, box: Box, query: Record<string, string | number | boolean | undefined> = {}): Promise<string[]> {
  return (await list(app, key, box, query)).emails.map((e) => e.id);
}

export async function mailboxEmail(app: TestApp, key: string, box: Box) {
  const res = await app.request('GET', `/v1/mailboxes/${box.id}`, { key });
  expect(res.status, res.text).toBe(200);
  return res.body.data.mailbox;
}

/** Fetches a download link the way clients do: no API key. */
export async function fetchLink(url: string, headers: Record<string, string> = {}) {
  const res = await fetch(url, { headers });
  return { status: res.status, headers: res.headers, bytes: Buffer.from(await res.arrayBuffer()) };
}
