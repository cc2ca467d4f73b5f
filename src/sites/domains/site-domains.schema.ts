// Row types of custom site domains (migration 0022), merged into the DB interface.

export type SiteDomainStatus = 'pending' | 'verified' | 'failed';
export type CertStatus = 'none' | 'pending' | 'issued' | 'failed';

export interface SiteDomainsTable {
  id: string;
  account_id: string;
  mailbox_id: string;
  hostname: string;
  verified_key: string | null;
  zone: string;
  status: SiteDomainStatus;
  is_primary: number;
  ownership_token: string;
  ownership_found: number | null;
  routing_found: number | null;
  error: string | null;
  last_checked_at: string | null;
  verified_at: string | null;
  last_passed_at: string | null;
  setup_expires_at: string | null;
  cert_status: CertStatus;
  cert_pem: string | null;
  cert_key_sealed: string | null;
  cert_expires_at: string | null;
  cert_error: string | null;
  cert_attempted_at: string | null;
  acme_token: string | null;
  acme_key_authorization: string | null;
  created_at: string;
  updated_at: string;
}

export interface SiteAcmeAccountsTable {
  directory_url: string;
  key_sealed: string;
  account_url: string | null;
  created_at: string;
}

declare module '../../db/schema.ts' {
  interface DB {
    site_domains: SiteDomainsTable;
    site_acme_accounts: SiteAcmeAccountsTable;
  }
  interface MailboxesTable {
    /** The verified primary custom domain of the bucket's site, or null. */
    site_domain: string | null;
  }
}

declare module '../sites.schema.ts' {
  interface PublicationsTable {
    /** The verified primary custom domain (main site only), or null. */
    site_domain: string | null;
  }
}

declare module '../../context.ts' {
  interface AppDeps {
    /** Origin of a site on a custom domain (src/sites/urls.ts customDomainOrigin, with the bound sites port). */
    siteDomainUrl: (hostname: string) => string;
  }
}
