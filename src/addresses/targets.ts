import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import type { AccountAccess } from '../auth/access.ts';
import { AppError } from '../errors.ts';
import { generatedUsername, normalizeUsername, randomSuffix, usernameFromText } from '../mailboxes/usernames.ts';
import { readyDomainOf, readyDomainsOf } from '../domains/domains.repo.ts';
import { domainsEnabled } from '../domains/domains.service.ts';
import { addressUnavailable } from './addresses.repo.ts';
import type { NewAddress } from './commit.ts';

// Where a new address goes (domain) and what it is called (local part): the platform domain takes
// a username prefix plus a fresh 4-character suffix; a custom domain takes the exact name.

export interface TargetDomain {
  hostname: string;
  custom: boolean;
}

export async function domainNotAvailable(ctx: RequestCtx, access: AccountAccess, domain: string, field: string): Promise<AppError> {
  const custom = domainsEnabled(access.account) ? await readyDomainsOf(ctx.db, access.account.id) : [];
  return new AppError('EMAIL_DOMAIN_NOT_AVAILABLE', `${domain} is not a ready receiving domain of this account.`, {
    field,
    domain,
    available_domains: [ctx.config.mailDomain, ...custom.map((d) => d.hostname)],
  });
}

/** Is `hostname` (platform, or a ready custom domain of exactly this account) receiving now? */
export async function domainReceives(ctx: RequestCtx, access: AccountAccess, hostname: string): Promise<boolean> {
  if (hostname === ctx.config.mailDomain) return true;
  return domainsEnabled(access.account) && (await readyDomainOf(ctx.db, access.account.id, hostname)) !== undefined;
}

/**
 * Resolves a requested domain: omitted means `fallback` (the current domain), `platform` the
 * platform domain, anything else must be the platform domain or a ready domain of the account
 * (which needs the custom-domain entitlement).
 */
export async function resolveTargetDomain(ctx: RequestCtx, access: AccountAccess, requested: string | null | undefined, fallback: string, field = 'domain'): Promise<TargetDomain> {
  const asked = requested === undefined || requested === null || requested.trim() === '' ? fallback : requested.trim().toLowerCase().replace(/\.$/, '');
  const hostname = asked === 'platform' ? ctx.config.mailDomain : asked;
  if (hostname === ctx.config.mailDomain) return { hostname, custom: false };
  if (!(await domainReceives(ctx, access, hostname))) throw await domainNotAvailable(ctx, access, requested ?? fallback, field);
  return { hostname, custom: true };
}

/**
 * A free address on the target domain. A given username is used as is (custom) or with a new
 * suffix (platform); without one the name comes from the mailbox title, else from words.
 * A taken exact name is EMAIL_ADDRESS_TAKEN.
 */
export async function freeAddress(db: Kysely<DB>, target: TargetDomain, given: string | null | undefined, title: string | null, field: string): Promise<NewAddress> {
  const trimmed = given?.trim() || null;
  const base = trimmed ? normalizeUsername(trimmed, field) : (title && usernameFromText(title)) || generatedUsername();
  for (let i = 0; i < 8; i++) {
    const username = !trimmed && target.custom && i > 0 ? generatedUsername() : base;
    const localPart = target.custom ? username : `${username}-${randomSuffix()}`;
    if (!(await addressUnavailable(db, `${localPart}@${target.hostname}`))) return { hostname: target.hostname, localPart, username };
    if (trimmed && target.custom) break;
  }
  throw new AppError('EMAIL_ADDRESS_TAKEN', undefined, { field, domain: target.hostname, ...(trimmed ? { username: base } : {}) });
}
