import type { DnsResolver } from '../inbound/authenticate.ts';

/**
 * pending_ownership: claimed, ownership TXT not seen yet. verified: ownership proven, the provider
 * TXT or MX not (yet) right. ready: receiving. paused: was ready, a recheck found the records
 * gone (not receiving until they are back). failed: setup window passed without verification.
 * removing: surface A delete queued. removed: gone (never shown).
 */
export type EmailDomainStatus = 'pending_ownership' | 'verified' | 'ready' | 'paused' | 'failed' | 'removing' | 'removed';

export interface EmailDomainsTable {
  id: string;
  account_id: string;
  hostname: string;
  claim_key: string | null;
  zone: string;
  status: EmailDomainStatus;
  ownership_token: string;
  provider_token: string;
  /** JSON {code, message, retryable} of the last check, or null. */
  error: string | null;
  pause_reason: string | null;
  paused_at: string | null;
  last_checked_at: string | null;
  ownership_verified_at: string | null;
  setup_expires_at: string | null;
  ready_at: string | null;
  removed_at: string | null;
  created_at: string;
  updated_at: string;
}

export interface EmailDomainSetupRequestsTable {
  id: string;
  account_id: string;
  created_at: string;
}

declare module '../db/schema.ts' {
  interface DB {
    email_domains: EmailDomainsTable;
    email_domain_setup_requests: EmailDomainSetupRequestsTable;
  }
}

declare module '../context.ts' {
  interface AppDeps {
    /** DNS for custom-domain checks (CUBBY_DNS_SERVERS, or the system's; tests serve their own). */
    domainDns?: DnsResolver;
  }
}
