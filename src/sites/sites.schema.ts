// Row types of the sites feature (migration 0010), merged into the DB interface.

export type PublicationKind = 'main' | 'preview';
export type PublicationStatus = 'publishing' | 'published' | 'unpublishing' | 'unpublished';
export type PublishState = 'queued' | 'processing' | 'ready' | 'failed' | 'unpublishing' | 'unpublished';
export type SiteMode = 'static' | 'spa';
export type AccessMode = 'public' | 'password' | 'require_email';
export type HomeKind = 'index' | 'lone' | 'auto';

export interface SiteSlugsTable {
  slug: string;
  mailbox_id: string;
  account_id: string;
  created_at: string;
}

/** A renamed slug answering 301 to the bucket's current one until expires_at (migration 0019). */
export interface SiteSlugRedirectsTable {
  old_slug: string;
  mailbox_id: string;
  expires_at: string;
  created_at: string;
}

export interface PublicationsTable {
  id: string;
  account_id: string;
  mailbox_id: string;
  kind: PublicationKind;
  public_slug: string;
  status: PublicationStatus;
  publish_state: PublishState;
  site_mode: SiteMode;
  access_mode: AccessMode;
  root_directory: string;
  password_sealed: string | null;
  access_epoch: number;
  request: string;
  request_seq: number;
  build_job_id: string | null;
  bundle_id: string | null;
  publish_error: string | null;
  publish_enqueued_at: string | null;
  publish_started_at: string | null;
  publish_completed_at: string | null;
  expires_at: string | null;
  unpublished_at: string | null;
  created_by_user_id: string | null;
  created_by_api_key_id: string | null;
  created_at: string;
  updated_at: string;
}

export interface SiteBundlesTable {
  id: string;
  publication_id: string;
  mailbox_id: string;
  content_key: string;
  root_directory: string;
  home_kind: HomeKind;
  entry_path: string;
  file_count: number;
  excluded_count: number;
  total_bytes: number;
  created_at: string;
}

export interface SiteFilesTable {
  bundle_id: string;
  path: string;
  sha256: string;
  byte_size: number;
  content_type: string;
  generated: number;
  gzip_sha256: string | null;
  gzip_size: number | null;
  br_sha256: string | null;
  br_size: number | null;
  viewer_sha256: string | null;
  viewer_size: number | null;
}

export interface SiteBundleBlobsTable {
  bundle_id: string;
  sha256: string;
}

export interface SiteAccessAttemptsTable {
  id: string;
  publication_id: string;
  kind: 'password_failed' | 'code_sent' | 'code_failed';
  client_key: string;
  email: string | null;
  created_at: string;
}

export interface SiteEmailCodesTable {
  id: string;
  publication_id: string;
  email: string;
  code_hash: string;
  attempts: number;
  expires_at: string;
  consumed_at: string | null;
  created_at: string;
}

declare module '../db/schema.ts' {
  interface DB {
    site_slugs: SiteSlugsTable;
    site_slug_redirects: SiteSlugRedirectsTable;
    publications: PublicationsTable;
    site_bundles: SiteBundlesTable;
    site_files: SiteFilesTable;
    site_bundle_blobs: SiteBundleBlobsTable;
    site_access_attempts: SiteAccessAttemptsTable;
    site_email_codes: SiteEmailCodesTable;
  }
  interface MailboxesTable {
    site_slug: string | null;
    site_state: 'published' | 'unpublishing' | null;
  }
}
