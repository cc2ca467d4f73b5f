import { z } from 'zod';
import { named, Timestamp } from '../http/contract.ts';
import { MailboxEmail } from '../mailboxes/mailboxes.responses.ts';

// Response schemas of a mailbox's email settings (surface R) and surface A's inbound_email.

export const SenderAllowlist = named(
  'SenderAllowlist',
  z.object({
    enabled: z.boolean(),
    entries: z.array(z.string()).describe('Exact addresses or @domain'),
    version: z.string().describe('Send as expected_version with the next update'),
    max_entries: z.number().int(),
    editable: z.boolean(),
  }),
  'Who may email the mailbox when enabled.',
);

export const AddressAssignment = named(
  'AddressAssignment',
  z.object({
    id: z.string(),
    kind: z.string().describe('primary or alias'),
    status: z.string().describe('pending, active or failed'),
    hostname: z.string(),
    error: z.record(z.string(), z.unknown()).nullable(),
    created_at: Timestamp,
    finished_at: Timestamp.nullable(),
  }),
  'The latest address change; poll until status is active or failed.',
);

const facts = {
  aliases: z.array(z.object({ id: z.string(), address: z.string(), active: z.boolean() })),
  available_domains: z.array(z.object({ hostname: z.string(), kind: z.enum(['platform', 'custom']) })),
  assignment: AddressAssignment.nullable(),
  customization: z.object({ allowed: z.boolean(), blocked_reason: z.string().nullable(), settings_url: z.string().nullable() }),
  rotations: z.object({ monthly_limit: z.number().nullable(), used: z.number().int(), remaining: z.number().nullable(), resets_at: Timestamp }),
};

export const EmailSettings = named(
  'EmailSettings',
  MailboxEmail.extend({
    username: z.string().nullable(),
    ...facts,
    sender_allowlist: SenderAllowlist.optional().describe('Only for account owners and administrators with admin permission'),
  }),
  "A mailbox's email settings: address, aliases, domains, assignment, customization and allowlist.",
  {
    address: 'receipts-7k2m@cubby.example',
    message_count: 3,
    unread_count: 1,
    last_received_at: '2026-11-24T10:00:00.000Z',
    receiving_enabled: true,
    sending_enabled: true,
    username: 'receipts-7k2m',
    aliases: [],
    available_domains: [{ hostname: 'cubby.example', kind: 'platform' }],
    assignment: null,
    customization: { allowed: true, blocked_reason: null, settings_url: 'https://cubby.example/settings' },
    rotations: { monthly_limit: 10, used: 0, remaining: 10, resets_at: '2026-12-01T00:00:00.000Z' },
  },
);

export const BucketInboundEmailSettings = named(
  'BucketInboundEmailSettings',
  z.object({
    address: z.string().nullable(),
    configured: z.boolean(),
    receiving_enabled: z.boolean(),
    last_received_at: Timestamp.nullable(),
    received_count: z.number().int(),
    monthly_limit: z.number().nullable(),
    last_received_path: z.string().nullable(),
    ...facts,
  }),
  "A bucket's inbound email address, activity, aliases, domains and assignment (surface A).",
);
