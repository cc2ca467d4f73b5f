import { randomToken, sha256Hex } from '../ids.ts';

// OAuth token shapes. Distinct prefixes keep them apart from API keys (`cubby_` + 40
// characters) and from each other, so a token is routed to the right table by its look.

const ACCESS = /^cubby_at_[A-Za-z0-9]{43}$/;
const REFRESH = /^cubby_rt_[A-Za-z0-9]{43}$/;

export const ACCESS_TOKEN_TTL_SECONDS = 3600;
export const REFRESH_TOKEN_TTL_SECONDS = 30 * 86_400;

export function isAccessToken(token: string): boolean {
  return ACCESS.test(token);
}

export function isRefreshToken(token: string): boolean {
  return REFRESH.test(token);
}

export function newSecret(prefix: string, length = 43): { token: string; hash: string } {
  const token = `${prefix}${randomToken(length)}`;
  return { token, hash: sha256Hex(token) };
}

export const newAccessToken = () => newSecret('cubby_at_');
export const newRefreshToken = () => newSecret('cubby_rt_');
