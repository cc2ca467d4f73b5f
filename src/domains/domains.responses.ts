import { z } from 'zod';
import { named, Pagination, Timestamp } from '../http/contract.ts';

// Response schemas of custom receiving domains (both surfaces).

export const DnsRecord = named(
  'DnsRecord',
  z.object({
    type: z.enum(['TXT', 'MX']),
    name: z.string(),
    value: z.string(),
    purpose: z.string().describe('ownership, ses_verification or receiving'),
    zone: z.string(),
    relative_name: z.string(),
  }),
  'A DNS record to publish at the domain provider.',
);

export const EmailDomain = named(
  'EmailDomain',
  z.object({
    id: z.string(),
    hostname: z.string(),
    status: z.string().describe('pending_ownership, verified, ready, paused, failed or removing'),
    guidance: z.string(),
    receiving: z.boolean(),
    root_domain: z.boolean(),
    suggested_subdomain: z.string().nullable(),
    root_guidance: z.string().nullable(),
    pause_reason: z.string().nullable(),
    paused_at: Timestamp.nullable(),
    last_checked_at: Timestamp.nullable(),
    ownership_verified_at: Timestamp.nullable(),
    setup_expires_at: Timestamp.nullable(),
    ready_at: Timestamp.nullable(),
    required_dns_records: z.array(DnsRecord),
    error: z.record(z.string(), z.unknown()).nullable(),
    assigned_mailboxes: z.array(z.object({ id: z.string(), email: z.string() })),
    created_at: Timestamp,
    updated_at: Timestamp,
  }),
  'A custom receiving domain and the DNS records it needs.',
  {
    id: 'dom_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    hostname: 'inbox.example.com',
    status: 'pending_ownership',
    guidance: 'Publish the ownership TXT record …, then call verify.',
    receiving: false,
    root_domain: false,
    suggested_subdomain: null,
    root_guidance: null,
    pause_reason: null,
    paused_at: null,
    last_checked_at: null,
    ownership_verified_at: null,
    setup_expires_at: '2026-11-27T10:00:00.000Z',
    ready_at: null,
    required_dns_records: [
      { type: 'MX', name: 'inbox.example.com', value: '10 mx.cubby.example', purpose: 'receiving', zone: 'example.com', relative_name: 'inbox' },
    ],
    error: null,
    assigned_mailboxes: [],
    created_at: '2026-11-24T10:00:00.000Z',
    updated_at: '2026-11-24T10:00:00.000Z',
  },
);

export const DomainList = z.object({ domains: z.array(EmailDomain), enabled: z.boolean(), guidance: z.string(), pagination: Pagination });
export const DomainOne = z.object({ domain: EmailDomain });
export const HostnameCheck = z.object({
  hostname: z.string(),
  root_domain: z.boolean(),
  suggested_subdomain: z.string().nullable(),
  root_guidance: z.string().nullable(),
  zone: z.string(),
  available: z.boolean(),
  unavailable_reason: z.string().nullable(),
});
