import type { AppDeps } from '../context.ts';
import type { Worker } from '../jobs/worker.ts';
import { iso } from '../time.ts';
import { DnsUnavailable, domainResolver, mxExchanges, txtValues } from './dns.ts';
import { OWNERSHIP_VALUE_PREFIX, PROVIDER_VALUE_PREFIX, ownershipName, providerName } from './hostnames.ts';
import { findDomainById, lockClaim, type DomainRow } from './domains.repo.ts';
import { REMOVE_TASK, VERIFY_TASK } from './domains.service.ts';
import { sweepSetupRequests } from './setup-limit.ts';
import type { EmailDomainStatus } from './domains.schema.ts';

// The DNS check of a custom domain (a durable job), the periodic rechecks, and queued removal.

export const RECHECK_TASK = 'domains.recheck';
const MINUTE = 60_000;
/** Domains still being set up are looked at this often (owners publish records at any time). */
export const PENDING_RECHECK_MS = 5 * MINUTE;
/** Ready and paused domains are rechecked this often (records can be removed or changed). */
export const READY_RECHECK_MS = 60 * MINUTE;

interface Finding {
  ownership: boolean;
  provider: boolean;
  mx: boolean;
}

async function lookUp(deps: AppDeps, d: DomainRow): Promise<Finding> {
  const resolve = domainResolver(deps);
  const [ownTxt, provTxt, mx] = await Promise.all([txtValues(resolve, ownershipName(d.hostname)), txtValues(resolve, providerName(d.hostname)), mxExchanges(resolve, d.hostname)]);
  return {
    ownership: ownTxt.some((v) => v.trim() === `${OWNERSHIP_VALUE_PREFIX}${d.ownership_token}`),
    provider: provTxt.some((v) => v.trim() === `${PROVIDER_VALUE_PREFIX}${d.provider_token}`),
    mx: mx.includes(deps.config.mxHost),
  };
}

function missing(f: Finding, mxHost: string): { code: string; message: string } | null {
  if (!f.ownership) return { code: 'ownership_record_missing', message: 'The ownership TXT record was not found with the expected value.' };
  if (!f.provider) return { code: 'provider_record_missing', message: 'The provider TXT record (purpose ses_verification) was not found with the expected value.' };
  if (!f.mx) return { code: 'mx_record_missing', message: `No MX record of the hostname points at ${mxHost}.` };
  return null;
}

/**
 * Checks one domain's records and moves it along: pending_ownership → verified → ready, ready ⇄
 * paused, and pending → failed once the setup window has passed. A DNS outage changes no status:
 * the error is recorded as retryable and the job is retried.
 */
export async function verifyDomain(deps: AppDeps, domainId: string): Promise<void> {
  const d = await findDomainById(deps.db, domainId);
  if (!d || d.status === 'removed' || d.status === 'removing' || d.status === 'failed') return;
  const now = deps.now();
  let finding: Finding;
  try {
    finding = await lookUp(deps, d);
  } catch (err) {
    if (!(err instanceof DnsUnavailable)) throw err;
    const error = { code: 'dns_unavailable', message: `DNS could not be queried (${err.code}); the check is retried.`, retryable: true };
    await deps.db.updateTable('email_domains').set({ error: JSON.stringify(error), last_checked_at: iso(now), updated_at: iso(now) }).where('id', '=', d.id).where('status', '=', d.status).execute();
    throw err;
  }
  const gap = missing(finding, deps.config.mxHost);
  const wasLive = d.status === 'ready' || d.status === 'paused';
  const patch: Partial<DomainRow> = { last_checked_at: iso(now), updated_at: iso(now) };
  if (finding.ownership && !d.ownership_verified_at) patch.ownership_verified_at = iso(now);
  let status: EmailDomainStatus;
  if (!gap) {
    status = 'ready';
    Object.assign(patch, { error: null, pause_reason: null, paused_at: null, setup_expires_at: null });
    if (d.status !== 'ready') patch.ready_at = iso(now);
  } else if (wasLive) {
    status = 'paused';
    Object.assign(patch, { pause_reason: gap.code, error: JSON.stringify({ ...gap, retryable: true }) });
    if (d.status !== 'paused') patch.paused_at = iso(now);
  } else if (d.setup_expires_at && Date.parse(d.setup_expires_at) <= now.getTime()) {
    status = 'failed';
    patch.error = JSON.stringify({ code: 'setup_expired', message: `Setup was not finished before ${d.setup_expires_at} (${gap.message}) Call verify to start again.`, retryable: false });
  } else {
    status = finding.ownership ? 'verified' : 'pending_ownership';
    patch.error = JSON.stringify({ ...gap, retryable: true });
  }
  patch.status = status;
  await deps.db.transaction().execute(async (trx) => {
    // Taken like address writes take it, and re-read: a removal that started meanwhile wins.
    const current = await lockClaim(trx, deps.dialect, d.hostname);
    if (!current || current.id !== d.id || current.status === 'removing' || current.status === 'failed') return;
    await trx.updateTable('email_domains').set(patch).where('id', '=', d.id).execute();
  });
}

/** Finishes a queued (surface A) removal; nothing could start using the domain meanwhile. */
export async function removeDomain(deps: AppDeps, domainId: string): Promise<void> {
  const now = iso(deps.now());
  await deps.db
    .updateTable('email_domains')
    .set({ status: 'removed', claim_key: null, removed_at: now, updated_at: now })
    .where('id', '=', domainId)
    .where('status', '=', 'removing')
    .execute();
}

/**
 * The periodic pass: fails pending domains whose setup window passed, and queues checks of
 * pending domains (every few minutes) and of ready or paused ones (hourly).
 */
export async function recheckDomains(deps: AppDeps): Promise<void> {
  const now = deps.now();
  const nowIso = iso(now);
  await deps.db
    .updateTable('email_domains')
    .set({ status: 'failed', error: JSON.stringify({ code: 'setup_expired', message: 'Setup was not finished in time; publish the records and call verify to start again.', retryable: false }), updated_at: nowIso })
    .where('status', 'in', ['pending_ownership', 'verified'])
    .where('setup_expires_at', '<=', nowIso)
    .execute();
  const pendingBefore = iso(now.getTime() - PENDING_RECHECK_MS);
  const liveBefore = iso(now.getTime() - READY_RECHECK_MS);
  const due = await deps.db
    .selectFrom('email_domains')
    .select('id')
    .where((eb) =>
      eb.or([
        eb.and([eb('status', 'in', ['pending_ownership', 'verified']), eb.or([eb('last_checked_at', 'is', null), eb('last_checked_at', '<=', pendingBefore)])]),
        eb.and([eb('status', 'in', ['ready', 'paused']), eb.or([eb('last_checked_at', 'is', null), eb('last_checked_at', '<=', liveBefore)])]),
      ]),
    )
    .limit(1000)
    .execute();
  for (const { id } of due) await deps.jobs.enqueue(deps.db, VERIFY_TASK, { domain_id: id }, { uniqueKey: `${VERIFY_TASK}:${id}`, maxAttempts: 5 });
  await sweepSetupRequests(deps.db, now);
}

export function registerDomainJobs(worker: Worker, deps: AppDeps): void {
  // DNS failures retry after 30 s, 1, 2, 4 minutes (then the periodic pass takes over).
  worker.register(VERIFY_TASK, { handler: (p: { domain_id: string }) => verifyDomain(deps, p.domain_id), backoffMs: (n) => 30_000 * 2 ** (n - 1) });
  worker.register(REMOVE_TASK, { handler: (p: { domain_id: string }) => removeDomain(deps, p.domain_id) });
  worker.register(RECHECK_TASK, { handler: () => recheckDomains(deps), leaseMs: 10 * MINUTE });
  worker.every(RECHECK_TASK, MINUTE);
}
