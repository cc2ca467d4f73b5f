import { expect, it } from 'vitest';
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
