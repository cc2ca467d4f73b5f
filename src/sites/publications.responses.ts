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

const AnalyticsCount = z.object({ value: z.string().describe('The path, referring host, country code or status code; "(other)" gathers values past the per-hour cap'), count: z.number().int() });

export const PublicationAnalytics = named(
  'PublicationAnalytics',
  z.object({
    publication_id: z.string(),
    bucket_id: z.string(),
    from: Timestamp.describe('Start of the first bucket (inclusive)'),
    to: Timestamp.describe('End of the last bucket (exclusive)'),
    granularity: z.enum(['hour', 'day']),
    totals: z.object({
      views: z.number().int().describe('Page views: GETs of HTML pages answered 2xx or 304, robots excluded'),
      visitors: z.number().int().describe('Unique visitors per UTC day, summed over the days the range touches (no cookies: a salted hash of IP and user agent that changes every day)'),
      requests: z.number().int().describe('Every response, pages, assets and errors'),
      bytes: z.number().int().describe('Body bytes sent'),
    }),
    series: z.array(
      z.object({
        start: Timestamp,
        views: z.number().int(),
        visitors: z.number().int().describe('Distinct visitors in this hour or day'),
        requests: z.number().int(),
        bytes: z.number().int(),
      }),
    ),
    top_paths: z.array(AnalyticsCount).describe('Most viewed paths (page views), at most 10'),
    top_referrers: z.array(AnalyticsCount).describe('Referring hosts of page views (host only), at most 10'),
    countries: z.array(AnalyticsCount).describe('ISO country codes of page views, at most 10; empty unless a GeoIP database is configured'),
    status_codes: z.array(AnalyticsCount).describe('Responses by HTTP status code'),
    countries_enabled: z.boolean().describe('Whether this Cubby has a GeoIP database (CUBBY_GEOIP_DB)'),
  }),
  "A published site's visits, counted without cookies, per UTC hour or day. Counts reach the database within CUBBY_SITE_ANALYTICS_FLUSH_MS (10 s by default).",
  {
    publication_id: 'pub_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    bucket_id: 'bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    from: '2026-11-25T00:00:00.000Z',
    to: '2026-11-27T00:00:00.000Z',
    granularity: 'day',
    totals: { views: 42, visitors: 17, requests: 120, bytes: 1048576 },
    series: [
      { start: '2026-11-25T00:00:00.000Z', views: 30, visitors: 12, requests: 90, bytes: 786432 },
      { start: '2026-11-26T00:00:00.000Z', views: 12, visitors: 5, requests: 30, bytes: 262144 },
    ],
    top_paths: [{ value: '/', count: 25 }, { value: '/about.html', count: 17 }],
    top_referrers: [{ value: 'news.example.com', count: 9 }],
    countries: [],
    status_codes: [{ value: '200', count: 110 }, { value: '404', count: 10 }],
    countries_enabled: false,
  },
);
export const PublicationAnalyticsOne = z.object({ analytics: PublicationAnalytics });
