import type { Kysely } from 'kysely';
import type { AppDeps } from '../../context.ts';
import type { DB } from '../../db/schema.ts';
import { isUniqueViolation } from '../../db/database.ts';
import { iso } from '../../time.ts';
import { DnsUnavailable, domainResolver, hostValues, txtValues } from '../../domains/dns.ts';
import { ownershipName } from '../../domains/hostnames.ts';
import { sitesChanged } from '../changes.ts';
import { cnameTarget, ownershipValue } from './hostnames.ts';
import type { SiteDomainsTable } from './site-domains.schema.ts';

// The DNS check of a custom site domain and what it changes: pending → verified once both the
// ownership TXT and the routing record are there; verified → failed when they have been gone for
// a day (a domain that changed hands must not keep serving, a DNS hiccup must not take it down);
// pending → failed when the setup window passes. A DNS outage changes no status.

const DAY = 86_400_000;
export const SETUP_WINDOW_MS = 7 * DAY;
export const GRACE_MS = DAY;

interface Finding {
  ownership: boolean;
  routing: boolean;
}

async function lookUp(deps: AppDeps, d: SiteDomainsTable): Promise<Finding> {
  const resolve = domainResolver(deps);
  const target = cnameTarget(deps.config);
  const [txt, cname] = await Promise.all([txtValues(resolve, ownershipName(d.hostname)), hostValues(resolve, d.hostname, 'CNAME')]);
  const ownership = txt.some((v) => v.trim() === ownershipValue(d.ownership_token));
  if (cname.some((c) => c === target || c.endsWith(`.${target}`))) return { ownership, routing: true };
  // No CNAME to us: every address of the name must be one of ours (the configured addresses, or
  // what the sites host resolves to, as a provider that flattens a CNAME at the apex publishes).
  const [a, aaaa] = await Promise.all([hostValues(resolve, d.hostname, 'A'), hostValues(resolve, d.hostname, 'AAAA')]);
  const addresses = [...a, ...aaaa];
  if (!addresses.length) return { ownership, routing: false };
  const ours = new Set(deps.config.siteDomains.addresses);
  if (target !== 'localhost') for (const t of ['A', 'AAAA'] as const) for (const ip of await hostValues(resolve, target, t)) ours.add(ip);
  return { ownership, routing: addresses.every((ip) => ours.has(ip)) };
}

function gapOf(f: Finding, d: SiteDomainsTable, target: string) {
  if (!f.ownership) return { code: 'ownership_record_missing', message: `The TXT record ${ownershipName(d.hostname)} was not found with the expected value.` };
  if (!f.routing) return { code: 'routing_record_missing', message: `${d.hostname} does not point here: add a CNAME to ${target} (or A/AAAA records naming the sites server's addresses).` };
  return null;
}

/** The bucket's public host follows its verified primary domain (mailboxes and its main publication). */
export async function refreshSiteHost(db: Kysely<DB>, mailboxId: string): Promise<void> {
  const primary = await db.selectFrom('site_domains').select('hostname').where('mailbox_id', '=', mailboxId).where('status', '=', 'verified').where('is_primary', '=', 1).executeTakeFirst();
  const host = primary?.hostname ?? null;
  await db.updateTable('mailboxes').set({ site_domain: host }).where('id', '=', mailboxId).execute();
  await db.updateTable('publications').set({ site_domain: host }).where('mailbox_id', '=', mailboxId).where('kind', '=', 'main').execute();
}

/**
 * Checks a domain's records now and records the outcome. `restart` (an explicit verify) gives a
 * failed domain a new setup window. Returns nothing; read the row again for the result.
 */
export async function checkSiteDomain(deps: AppDeps, domainId: string, opts: { restart?: boolean } = {}): Promise<void> {
  const d = await deps.db.selectFrom('site_domains').selectAll().where('id', '=', domainId).executeTakeFirst();
  if (!d) return;
  if (d.status === 'failed' && !opts.restart) return;
  const now = deps.now();
  let finding: Finding;
  try {
    finding = await lookUp(deps, d);
  } catch (err) {
    if (!(err instanceof DnsUnavailable)) throw err;
    const error = { code: 'dns_unavailable', message: `DNS could not be queried (${err.code}); check again shortly.`, retryable: true };
    await deps.db.updateTable('site_domains').set({ error: JSON.stringify(error), last_checked_at: iso(now), updated_at: iso(now) }).where('id', '=', d.id).execute();
    throw err;
  }
  const gap = gapOf(finding, d, cnameTarget(deps.config));
  const patch: Partial<SiteDomainsTable> = { ownership_found: finding.ownership ? 1 : 0, routing_found: finding.routing ? 1 : 0, last_checked_at: iso(now), updated_at: iso(now) };
  const restarting = d.status === 'failed';
  if (restarting) Object.assign(patch, { status: 'pending', setup_expires_at: iso(now.getTime() + SETUP_WINDOW_MS) });
  if (!gap) {
    let taken = await deps.db
      .selectFrom('site_domains')
      .innerJoin('mailboxes', 'mailboxes.id', 'site_domains.mailbox_id')
      .select(['site_domains.id', 'mailboxes.deleted_at'])
      .where('site_domains.verified_key', '=', d.hostname)
      .where('site_domains.id', '!=', d.id)
      .executeTakeFirst();
    if (taken?.deleted_at) {
      // A deleted bucket's domain holds nothing any more.
      await deps.db.deleteFrom('site_domains').where('id', '=', taken.id).execute();
      taken = undefined;
    }
    if (taken) {
      Object.assign(patch, { status: d.status === 'verified' ? 'failed' : 'pending', verified_key: null, error: JSON.stringify({ code: 'hostname_taken', message: `${d.hostname} is verified for another site; it must be removed there first.`, retryable: true }) });
    } else {
      Object.assign(patch, { status: 'verified', verified_key: d.hostname, error: null, last_passed_at: iso(now), setup_expires_at: null });
      if (d.status !== 'verified') patch.verified_at = iso(now);
    }
  } else if (d.status === 'verified') {
    const since = Date.parse(d.last_passed_at ?? d.verified_at ?? iso(now));
    if (now.getTime() - since >= GRACE_MS) Object.assign(patch, { status: 'failed', verified_key: null, error: JSON.stringify({ ...gap, message: `${gap.message} The domain stopped serving the site; publish the record and verify again.`, retryable: false }) });
    else patch.error = JSON.stringify({ ...gap, message: `${gap.message} The site keeps answering until ${iso(since + GRACE_MS)}.`, retryable: true });
  } else {
    const expires = restarting ? now.getTime() + SETUP_WINDOW_MS : Date.parse(d.setup_expires_at ?? iso(now.getTime() + SETUP_WINDOW_MS));
    if (expires <= now.getTime()) Object.assign(patch, { status: 'failed', error: JSON.stringify({ code: 'setup_expired', message: `Setup was not finished in time (${gap.message}) Call verify to start again.`, retryable: false }) });
    else patch.error = JSON.stringify({ ...gap, retryable: true });
  }
  try {
    await deps.db.transaction().execute(async (trx) => {
      // A removal that committed meanwhile wins.
      const res = await trx.updateTable('site_domains').set(patch).where('id', '=', d.id).where('status', '=', d.status).executeTakeFirst();
      if (Number(res.numUpdatedRows) === 0) return;
      await refreshSiteHost(trx, d.mailbox_id);
    });
  } catch (err) {
    // Another site verified the hostname between the read above and this write.
    if (!isUniqueViolation(err)) throw err;
    const error = { code: 'hostname_taken', message: `${d.hostname} is verified for another site; it must be removed there first.`, retryable: true };
    await deps.db.updateTable('site_domains').set({ error: JSON.stringify(error), last_checked_at: iso(now), updated_at: iso(now) }).where('id', '=', d.id).execute();
  }
  sitesChanged(deps.db);
}
