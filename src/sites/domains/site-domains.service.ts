import type { RequestCtx } from '../../context.ts';
import { AppError } from '../../errors.ts';
import { isUniqueViolation } from '../../db/database.ts';
import { randomToken } from '../../ids.ts';
import { iso } from '../../time.ts';
import { assertMutable } from '../../auth/access.ts';
import { recordActivity } from '../../activity/activity.service.ts';
import { loadMailbox } from '../../mailboxes/mailboxes.service.ts';
import { DnsUnavailable, domainResolver, zoneOf } from '../../domains/dns.ts';
import { hitSetupLimit } from '../../domains/setup-limit.ts';
import { assertPublishingEnabled } from '../publish.service.ts';
import { sitesChanged } from '../changes.ts';
import { siteId } from '../ids.ts';
import { SETUP_WINDOW_MS, checkSiteDomain, refreshSiteHost } from './check.ts';
import { normalizeSiteHostname } from './hostnames.ts';
import type { SiteDomainsTable } from './site-domains.schema.ts';

// Custom domains of a bucket's site: add (with an immediate DNS check), read, verify again, make
// primary, remove. Tenancy is the bucket's (loadMailbox): another account's domain id answers
// like a missing one.

export const MAX_DOMAINS_PER_BUCKET = 10;
export const CERT_TASK = 'sites.domains.certificate';

const DOMAIN_ID = /^sdm_[A-Za-z0-9]{1,64}$/;

async function domainOf(ctx: RequestCtx, bucketId: string, domainId: string): Promise<SiteDomainsTable> {
  const d = DOMAIN_ID.test(domainId) ? await ctx.db.selectFrom('site_domains').selectAll().where('id', '=', domainId).where('mailbox_id', '=', bucketId).executeTakeFirst() : undefined;
  if (!d) throw new AppError('SITE_DOMAIN_NOT_FOUND', undefined, { domain_id: domainId, bucket_id: bucketId });
  return d;
}

function reload(ctx: RequestCtx, id: string): Promise<SiteDomainsTable> {
  return ctx.db.selectFrom('site_domains').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
}

/** Runs the DNS check inside a request; a DNS outage is recorded on the domain, not raised. */
async function checkNow(ctx: RequestCtx, id: string, restart: boolean): Promise<void> {
  try {
    await checkSiteDomain(ctx, id, { restart });
  } catch (err) {
    if (!(err instanceof DnsUnavailable)) throw err;
  }
  if (ctx.config.siteDomains.acme) {
    const d = await reload(ctx, id);
    if (d.status === 'verified' && d.cert_status !== 'issued') await ctx.jobs.enqueue(ctx.db, CERT_TASK, { domain_id: id }, { uniqueKey: `${CERT_TASK}:${id}`, maxAttempts: 3 });
  }
}

export async function listSiteDomains(ctx: RequestCtx, bucketId: string, selector: string | undefined): Promise<SiteDomainsTable[]> {
  await loadMailbox(ctx, selector, bucketId, 'read');
  return ctx.db.selectFrom('site_domains').selectAll().where('mailbox_id', '=', bucketId).orderBy('id').execute();
}

export async function getSiteDomain(ctx: RequestCtx, bucketId: string, selector: string | undefined, domainId: string): Promise<SiteDomainsTable> {
  await loadMailbox(ctx, selector, bucketId, 'read');
  return domainOf(ctx, bucketId, domainId);
}

/**
 * Adds a hostname to the bucket's site (201), or answers the bucket's existing entry for it (200),
 * then checks DNS at once: records published beforehand verify it right away.
 */
export async function addSiteDomain(ctx: RequestCtx, bucketId: string, selector: string | undefined, input: { hostname: string; primary?: boolean | null }, reason: string | null): Promise<{ domain: SiteDomainsTable; created: boolean }> {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'write');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: bucketId });
  assertPublishingEnabled(loaded.access);
  const hostname = normalizeSiteHostname(input.hostname, ctx.config);
  const existing = await ctx.db.selectFrom('site_domains').selectAll().where('mailbox_id', '=', bucketId).where('hostname', '=', hostname).executeTakeFirst();
  if (existing) return { domain: existing, created: false };
  await assertNotTaken(ctx, hostname, bucketId);
  const count = await ctx.db.selectFrom('site_domains').select((eb) => eb.fn.countAll<number>().as('n')).where('mailbox_id', '=', bucketId).executeTakeFirstOrThrow();
  if (Number(count.n) >= MAX_DOMAINS_PER_BUCKET) throw new AppError('SITE_DOMAIN_LIMIT_REACHED', `A bucket can have ${MAX_DOMAINS_PER_BUCKET} custom domains.`, { limit: 'site_domains_per_bucket', max: MAX_DOMAINS_PER_BUCKET });
  await hitSetupLimit(ctx, loaded.access.account.id, 'SITE_DOMAIN_SETUP_RATE_LIMITED');
  let zone: string;
  try {
    zone = await zoneOf(domainResolver(ctx), hostname);
  } catch (err) {
    if (!(err instanceof DnsUnavailable)) throw err;
    zone = hostname.split('.').slice(-2).join('.');
  }
  const now = ctx.now();
  const id = siteId('sdm');
  // The first domain of a bucket is its primary unless told otherwise.
  const primary = input.primary ?? Number(count.n) === 0;
  try {
    await ctx.db.transaction().execute(async (trx) => {
      if (primary) await trx.updateTable('site_domains').set({ is_primary: 0, updated_at: iso(now) }).where('mailbox_id', '=', bucketId).execute();
      await trx
        .insertInto('site_domains')
        .values({
          id,
          account_id: loaded.mailbox.account_id,
          mailbox_id: bucketId,
          hostname,
          verified_key: null,
          zone,
          status: 'pending',
          is_primary: primary ? 1 : 0,
          ownership_token: randomToken(32),
          setup_expires_at: iso(now.getTime() + SETUP_WINDOW_MS),
          cert_status: 'none',
          created_at: iso(now),
          updated_at: iso(now),
        })
        .execute();
      await refreshSiteHost(trx, bucketId);
      await recordActivity(trx, ctx.actor, now, { accountId: loaded.mailbox.account_id, action: 'site_domain.add', targetType: 'mailbox', targetId: bucketId, reason });
    });
  } catch (err) {
    // The same hostname added twice at once: the other request's row is the answer.
    if (!isUniqueViolation(err)) throw err;
    const row = await ctx.db.selectFrom('site_domains').selectAll().where('mailbox_id', '=', bucketId).where('hostname', '=', hostname).executeTakeFirstOrThrow();
    return { domain: row, created: false };
  }
  sitesChanged(ctx.db);
  await checkNow(ctx, id, false);
  return { domain: await reload(ctx, id), created: true };
}

/**
 * A hostname verified for another site is taken (409). A verified claim of a deleted bucket no
 * longer holds: it is released here. Pending claims elsewhere never block (they prove nothing).
 */
async function assertNotTaken(ctx: RequestCtx, hostname: string, bucketId: string): Promise<void> {
  const holder = await ctx.db
    .selectFrom('site_domains')
    .innerJoin('mailboxes', 'mailboxes.id', 'site_domains.mailbox_id')
    .select(['site_domains.id', 'site_domains.mailbox_id', 'mailboxes.deleted_at'])
    .where('site_domains.verified_key', '=', hostname)
    .executeTakeFirst();
  if (!holder || holder.mailbox_id === bucketId) return;
  if (holder.deleted_at) {
    await ctx.db.deleteFrom('site_domains').where('id', '=', holder.id).execute();
    return;
  }
  throw new AppError('SITE_DOMAIN_TAKEN', `${hostname} is already verified for another site. If it is yours, remove it there first.`, { field: 'hostname', hostname });
}

/** Checks DNS again now (a failed domain starts a new setup window). */
export async function verifySiteDomain(ctx: RequestCtx, bucketId: string, selector: string | undefined, domainId: string): Promise<SiteDomainsTable> {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'write');
  assertMutable(loaded.access);
  const d = await domainOf(ctx, bucketId, domainId);
  await hitSetupLimit(ctx, loaded.access.account.id, 'SITE_DOMAIN_SETUP_RATE_LIMITED');
  await checkNow(ctx, d.id, true);
  return reload(ctx, d.id);
}

/** Makes the domain the bucket's primary one (the only one: others lose the flag). */
export async function makePrimary(ctx: RequestCtx, bucketId: string, selector: string | undefined, domainId: string, primary: boolean, reason: string | null): Promise<SiteDomainsTable> {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'write');
  assertMutable(loaded.access);
  const d = await domainOf(ctx, bucketId, domainId);
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    if (primary) await trx.updateTable('site_domains').set({ is_primary: 0, updated_at: iso(now) }).where('mailbox_id', '=', bucketId).where('id', '!=', d.id).execute();
    await trx.updateTable('site_domains').set({ is_primary: primary ? 1 : 0, updated_at: iso(now) }).where('id', '=', d.id).execute();
    await refreshSiteHost(trx, bucketId);
    await recordActivity(trx, ctx.actor, now, { accountId: d.account_id, action: 'site_domain.update', targetType: 'mailbox', targetId: bucketId, reason });
  });
  sitesChanged(ctx.db);
  return reload(ctx, d.id);
}

/** Removes the domain: the site stops answering on it at once and the hostname is free again. */
export async function removeSiteDomain(ctx: RequestCtx, bucketId: string, selector: string | undefined, domainId: string, reason: string | null): Promise<string> {
  const loaded = await loadMailbox(ctx, selector, bucketId, 'write');
  assertMutable(loaded.access);
  const d = await domainOf(ctx, bucketId, domainId);
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    await trx.deleteFrom('site_domains').where('id', '=', d.id).execute();
    await refreshSiteHost(trx, bucketId);
    await recordActivity(trx, ctx.actor, now, { accountId: d.account_id, action: 'site_domain.remove', targetType: 'mailbox', targetId: bucketId, reason });
  });
  sitesChanged(ctx.db);
  return d.id;
}
