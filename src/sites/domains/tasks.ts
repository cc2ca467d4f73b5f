import type { AppDeps } from '../../context.ts';
import type { Worker } from '../../jobs/worker.ts';
import { iso } from '../../time.ts';
import { checkSiteDomain } from './check.ts';
import { RENEW_BEFORE_MS, issueCertificate } from './acme.ts';
import { CERT_TASK } from './site-domains.service.ts';

// The periodic pass over custom site domains: pending ones are checked every 5 minutes until
// verified or their setup window passes, verified ones hourly (records can disappear); with ACME,
// certificates are requested for verified domains without one and renewed 30 days before expiry.

export const CHECK_TASK = 'sites.domains.check';
export const RECHECK_TASK = 'sites.domains.recheck';
const MINUTE = 60_000;
const PENDING_EVERY_MS = 5 * MINUTE;
const VERIFIED_EVERY_MS = 60 * MINUTE;
/** A failed certificate request is tried again after this long. */
const CERT_RETRY_MS = 60 * MINUTE;

export async function recheckSiteDomains(deps: AppDeps): Promise<void> {
  const now = deps.now().getTime();
  const due = await deps.db
    .selectFrom('site_domains')
    .select('id')
    .where((eb) =>
      eb.or([
        eb.and([eb('status', '=', 'pending'), eb.or([eb('last_checked_at', 'is', null), eb('last_checked_at', '<=', iso(now - PENDING_EVERY_MS))])]),
        eb.and([eb('status', '=', 'verified'), eb.or([eb('last_checked_at', 'is', null), eb('last_checked_at', '<=', iso(now - VERIFIED_EVERY_MS))])]),
      ]),
    )
    .limit(1000)
    .execute();
  for (const { id } of due) await deps.jobs.enqueue(deps.db, CHECK_TASK, { domain_id: id }, { uniqueKey: `${CHECK_TASK}:${id}`, maxAttempts: 3 });
  if (!deps.config.siteDomains.acme) return;
  const certs = await deps.db
    .selectFrom('site_domains')
    .select('id')
    .where('status', '=', 'verified')
    .where((eb) =>
      eb.or([
        eb('cert_status', '=', 'none'),
        eb.and([eb('cert_status', 'in', ['failed', 'pending']), eb.or([eb('cert_attempted_at', 'is', null), eb('cert_attempted_at', '<=', iso(now - CERT_RETRY_MS))])]),
        eb.and([eb('cert_status', '=', 'issued'), eb('cert_expires_at', '<=', iso(now + RENEW_BEFORE_MS)), eb.or([eb('cert_attempted_at', 'is', null), eb('cert_attempted_at', '<=', iso(now - CERT_RETRY_MS))])]),
      ]),
    )
    .limit(100)
    .execute();
  for (const { id } of certs) await deps.jobs.enqueue(deps.db, CERT_TASK, { domain_id: id }, { uniqueKey: `${CERT_TASK}:${id}`, maxAttempts: 3 });
}

export function registerSiteDomainTasks(worker: Worker, deps: AppDeps): void {
  worker.register(CHECK_TASK, { handler: (p: { domain_id: string }) => checkSiteDomain(deps, p.domain_id), backoffMs: (n) => 30_000 * 2 ** (n - 1) });
  worker.register(CERT_TASK, { handler: (p: { domain_id: string }) => issueCertificate(deps, p.domain_id), leaseMs: 10 * MINUTE, backoffMs: (n) => 60_000 * 4 ** (n - 1) });
  worker.register(RECHECK_TASK, { handler: () => recheckSiteDomains(deps), leaseMs: 5 * MINUTE });
  worker.every(RECHECK_TASK, MINUTE);
}
