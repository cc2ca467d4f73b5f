import { expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { signId, signToken, verifySignedId, verifyToken } from '../src/http/signed.ts';
import { newId } from '../src/ids.ts';

// Regression: signed ids were split at the last '--', which broke whenever the base64url
// MAC began with '-' (about one id in 30), so valid uploads were refused at random.
it('every signed id verifies, whatever characters its MAC holds', () => {
  for (let i = 0; i < 2000; i++) {
    const id = newId('du');
    expect(verifySignedId('secret', 'p', signId('secret', 'p', id))).toBe(id);
  }
});

it('signed ids and tokens are refused when forged, for another purpose, or expired', () => {
  const id = newId('du');
  const signed = signId('secret', 'p', id);
  expect(verifySignedId('secret', 'other', signed)).toBeNull();
  expect(verifySignedId('other-secret', 'p', signed)).toBeNull();
  expect(verifySignedId('secret', 'p', `${id}--AAAA`)).toBeNull();
  const now = new Date();
  const token = signToken('secret', 'p', { id, exp: now.getTime() + 1000 });
  expect(verifyToken('secret', 'p', token, now)).toMatchObject({ id });
  expect(verifyToken('secret', 'p', token, new Date(now.getTime() + 1000))).toBeNull();
  expect(verifyToken('secret', 'q', token, now)).toBeNull();
  expect(verifyToken('secret', 'p', `${token}x`, now)).toBeNull();
});

// Links and ids handed out before an upgrade must still verify: the MAC is HMAC-SHA-256 keyed with
// `<secret>:<purpose>`, whether the key is short (used as is) or longer than the hash's block (a
// real secret: hashed first, as RFC 2104 says).
it('MACs are HMAC-SHA-256 over `<secret>:<purpose>`, for short and long secrets alike', () => {
  for (const secret of ['s', 'k'.repeat(50), 'f'.repeat(64), 'x'.repeat(300)]) {
    const id = newId('du');
    const expected = createHmac('sha256', `${secret}:upload-url`).update(id).digest('base64url').slice(0, 32);
    expect(signId(secret, 'upload-url', id)).toBe(`${id}--${expected}`);
    const body = Buffer.from(JSON.stringify({ id, exp: Date.now() + 60_000 })).toString('base64url');
    const old = `${body}.${createHmac('sha256', `${secret}:upload-url`).update(body).digest('base64url').slice(0, 32)}`;
    expect(verifyToken(secret, 'upload-url', old, new Date())).toMatchObject({ id });
  }
});
