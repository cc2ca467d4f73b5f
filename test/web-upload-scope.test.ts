import { expect, it } from 'vitest';
import { describeEachDatabase } from './harness.ts';

// The dashboard's raw-bytes parser (up to 100 MB, for files sent to an upload session) belongs to
// the upload routes alone: other forms keep refusing that type, and nobody signed out gets as far
// as sending bytes.
describeEachDatabase('dashboard upload routes scope', (app) => {
  const bytes = () => new Uint8Array(64 * 1024).fill(0x61);

  it('other dashboard forms refuse application/octet-stream with 415, as before', async () => {
    const res = await fetch(`${app().base}/users/sign_in`, { method: 'POST', headers: { 'content-type': 'application/octet-stream' }, body: bytes() });
    expect(res.status).toBe(415);
  });

  it('an upload without a signed-in session is refused with 401 before its body is read', async () => {
    const res = await fetch(`${app().base}/mailboxes/mbx_nope/files/sessions/ups_nope/files?path=a.txt`, {
      method: 'POST',
      headers: { 'content-type': 'application/octet-stream' },
      body: bytes(),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ code: 'UNAUTHENTICATED' });
  });
});
