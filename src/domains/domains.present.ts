import type { DomainRow } from './domains.repo.ts';
import { requiredRecords, rootGuidance, suggestedSubdomain } from './hostnames.ts';

const GUIDANCE: Record<string, string> = {
  pending_ownership:
    'Publish the ownership TXT record (and, to save a round, the other two records) at the DNS provider of the domain, then call verify. ' +
    'Change DNS only with the domain owner\'s authorization.',
  verified: 'Ownership is proven. Publish the provider TXT record and the MX record exactly as listed, then call verify again.',
  ready: 'The domain receives mail. Create mailboxes on it or move addresses to it; keep the records published.',
  paused: 'Receiving is paused because a required record is missing or changed (see pause_reason). Publish the records again; the next check resumes receiving.',
  failed: 'Setup was not finished in time (see error). Publish the records and call verify to start a new setup window.',
  removing: 'The domain is being removed.',
};

export function domainGuidance(status: string): string {
  return GUIDANCE[status] ?? '';
}

export function listGuidance(enabled: boolean): string {
  return enabled
    ? 'Claim an exact hostname (a subdomain such as inbox.example.com is best), publish the returned DNS records, then verify. Mailboxes receive on a domain once it is ready.'
    : 'Custom email domains are an invitation-only paid pilot; this account does not have them. Addresses stay on the platform mail domain.';
}

/** Email domain (surface R and A): every field of the spec's resource. */
export function presentDomain(d: DomainRow, assigned: { id: string; email: string }[], mxHost: string) {
  const root = d.hostname === d.zone;
  return {
    id: d.id,
    hostname: d.hostname,
    status: d.status,
    guidance: domainGuidance(d.status),
    receiving: d.status === 'ready',
    root_domain: root,
    suggested_subdomain: root ? suggestedSubdomain(d.hostname) : null,
    root_guidance: root ? rootGuidance(d.hostname) : null,
    pause_reason: d.pause_reason,
    paused_at: d.paused_at,
    last_checked_at: d.last_checked_at,
    ownership_verified_at: d.ownership_verified_at,
    setup_expires_at: d.setup_expires_at,
    ready_at: d.ready_at,
    required_dns_records: requiredRecords(d, mxHost),
    error: d.error ? JSON.parse(d.error) : null,
    assigned_mailboxes: assigned,
    created_at: d.created_at,
    updated_at: d.updated_at,
  };
}
