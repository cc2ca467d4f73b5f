import { z } from 'zod';
import { named, Pagination, Timestamp } from '../http/contract.ts';

// Response schemas of website publications (surface A).

export const Publication = named(
  'Publication',
  z.object({
    id: z.string(),
    bucket_id: z.string(),
    kind: z.enum(['main', 'bucket_bundle', 'preview']).describe('bucket_bundle: the main site of a bucket (the name existing clients filter on); preview: its preview'),
    preview: z.boolean(),
    public_slug: z.string(),
    public_url: z.string(),
    status: z.string().describe('published, unpublishing or unpublished'),
    publish_state: z.string().describe('queued, processing, ready or failed'),
    publish_pending: z.boolean(),
    site_mode: z.string(),
    site_type: z.literal('website'),
    access_mode: z.string().describe('public, password or require_email'),
    noindex: z.boolean(),
    publication_root_directory: z.string(),
    expires_at: Timestamp.nullable(),
    expired: z.boolean(),
    publish_enqueued_at: Timestamp.nullable(),
    publish_started_at: Timestamp.nullable(),
    publish_completed_at: Timestamp.nullable(),
    publish_error: z.unknown().nullable(),
    unpublished_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
    password: z.string().nullable().optional().describe('Owner side, access_mode password, once ready'),
    access_password: z.string().nullable().optional().describe('The same password, under the name existing clients read (docs/compat.md)'),
    share_text: z.string().optional().describe('Owner side, once ready: what to send to visitors'),
  }),
  'A static website published from a bucket (main) or its 24-hour preview.',
  {
    id: 'pub_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    bucket_id: 'bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    kind: 'bucket_bundle',
    preview: false,
    public_slug: 'ada-notes',
    public_url: 'https://ada-notes.sites.cubby.example',
    status: 'published',
    publish_state: 'ready',
    publish_pending: false,
    site_mode: 'static',
    site_type: 'website',
    access_mode: 'public',
    noindex: false,
    publication_root_directory: '',
    expires_at: null,
    expired: false,
    publish_enqueued_at: '2026-11-24T10:00:00.000Z',
    publish_started_at: '2026-11-24T10:00:01.000Z',
    publish_completed_at: '2026-11-24T10:00:02.000Z',
    publish_error: null,
    unpublished_at: null,
    created_at: '2026-11-24T10:00:00.000Z',
    updated_at: '2026-11-24T10:00:02.000Z',
    share_text: 'https://ada-notes.sites.cubby.example',
  },
);

export const PublicationOne = z.object({ publication: Publication });
export const BucketPublications = z.object({ publication: Publication.nullable(), preview: Publication.nullable() });
export const PublicationList = z.object({ publications: z.array(Publication), pagination: Pagination });
export const SlugRenamed = z.object({
  public_slug: z.string(),
  public_url: z.string(),
  preview_url: z.string(),
  publication: Publication.nullable(),
  preview: Publication.nullable(),
});
