import { z } from 'zod';
import { named, Timestamp } from '../../http/contract.ts';

// Response schemas of custom site domains (surface A).

const DnsRecord = z.object({
  type: z.enum(['TXT', 'CNAME', 'A', 'AAAA', 'ALIAS']).describe('ALIAS: an ALIAS/ANAME or flattened CNAME at a root domain, where a CNAME is not allowed'),
  name: z.string(),
  value: z.string(),
  purpose: z.enum(['ownership', 'routing']),
  zone: z.string(),
  relative_name: z.string().describe('name relative to zone (@ for the apex), as DNS providers\' forms want it'),
  status: z.enum(['found', 'missing', 'unchecked']).describe('What the last check found'),
});

export const SiteDomain = named(
  'SiteDomain',
  z.object({
    id: z.string(),
    bucket_id: z.string(),
    hostname: z.string().describe('Lower case, A-label (punycode) form'),
    status: z.enum(['pending', 'verified', 'failed']).describe('pending: records not seen yet; verified: the site answers on it; failed: setup window passed or records gone for a day'),
    primary: z.boolean().describe('The site\'s main address: its slug URL and other domains redirect here once verified'),
    url: z.string(),
    serving: z.boolean(),
    dns_records: z.array(DnsRecord),
    error: z.object({ code: z.string(), message: z.string(), retryable: z.boolean() }).nullable(),
    tls: z.object({
      mode: z.enum(['proxy', 'acme']).describe('proxy: TLS is the reverse proxy\'s; acme: certificates from CUBBY_ACME_DIRECTORY'),
      status: z.enum(['none', 'pending', 'issued', 'failed']).nullable(),
      expires_at: Timestamp.nullable(),
      error: z.string().nullable(),
    }),
    verified_at: Timestamp.nullable(),
    last_checked_at: Timestamp.nullable(),
    setup_expires_at: Timestamp.nullable(),
    created_at: Timestamp,
    updated_at: Timestamp,
  }),
  'A custom domain of a bucket\'s website, with the DNS records that prove ownership and route it here.',
  {
    id: 'sdm_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    bucket_id: 'bkt_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    hostname: 'www.example.org',
    status: 'pending',
    primary: true,
    url: 'https://www.example.org',
    serving: false,
    dns_records: [
      { type: 'TXT', name: '_cubby-verification.www.example.org', value: 'cubby-verification=3x4mpl3t0k3n', purpose: 'ownership', zone: 'example.org', relative_name: '_cubby-verification.www', status: 'missing' },
      { type: 'CNAME', name: 'www.example.org', value: 'sites.cubby.example', purpose: 'routing', zone: 'example.org', relative_name: 'www', status: 'missing' },
    ],
    error: { code: 'ownership_record_missing', message: 'The TXT record _cubby-verification.www.example.org was not found with the expected value.', retryable: true },
    tls: { mode: 'proxy', status: null, expires_at: null, error: null },
    verified_at: null,
    last_checked_at: '2026-11-24T10:00:00.000Z',
    setup_expires_at: '2026-12-01T10:00:00.000Z',
    created_at: '2026-11-24T10:00:00.000Z',
    updated_at: '2026-11-24T10:00:00.000Z',
  },
);

export const SiteDomainOne = z.object({ domain: SiteDomain });
export const SiteDomainList = z.object({ domains: z.array(SiteDomain) });
