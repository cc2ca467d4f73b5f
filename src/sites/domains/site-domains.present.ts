import type { AppDeps } from '../../context.ts';
import { requiredSiteRecords } from './hostnames.ts';
import type { SiteDomainsTable } from './site-domains.schema.ts';

// The SiteDomain record: its state, the records to publish (each with what the last check found),
// the URL it serves at, and how TLS is provided.

export function presentSiteDomain(deps: AppDeps, d: SiteDomainsTable) {
  const acme = deps.config.siteDomains.acme !== null;
  return {
    id: d.id,
    bucket_id: d.mailbox_id,
    hostname: d.hostname,
    status: d.status,
    primary: d.is_primary === 1,
    url: deps.siteDomainUrl(d.hostname),
    serving: d.status === 'verified',
    dns_records: requiredSiteRecords(d, deps.config),
    error: d.error ? (JSON.parse(d.error) as { code: string; message: string; retryable: boolean }) : null,
    tls: {
      mode: acme ? ('acme' as const) : ('proxy' as const),
      status: acme ? d.cert_status : null,
      expires_at: acme ? d.cert_expires_at : null,
      error: acme && d.cert_error ? d.cert_error : null,
    },
    verified_at: d.verified_at,
    last_checked_at: d.last_checked_at,
    setup_expires_at: d.status === 'pending' ? d.setup_expires_at : null,
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}
