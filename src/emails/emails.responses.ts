import { z } from 'zod';
import { named, Pagination, Timestamp } from '../http/contract.ts';
import { DownloadLink } from '../files/files.responses.ts';

// Response schemas of emails (surface R): list, read, read status, delete, downloads, send.

export const EmailAddress = named('EmailAddress', z.object({ address: z.string(), name: z.string().nullable() }), 'An address of a message header; withheld mail shows only the domain of sender-side addresses.');

export const Label = named('Label', z.object({ id: z.string(), name: z.string(), color: z.string() }), 'A category label added by the labeler.');

const EmailStorage = {
  file_id: z.string().nullable().optional().describe('With include_storage: the original message file'),
  version_id: z.string().nullable().optional(),
  files: z
    .object({ body_id: z.string().nullable(), original_id: z.string().nullable(), attachment_ids: z.array(z.string()), directory: z.string().nullable() })
    .optional()
    .describe('With include_storage: the stored files of this email'),
};

const summary = {
  id: z.string(),
  conversation_id: z.string().nullable(),
  direction: z.enum(['received', 'sent']),
  subject: z.string().nullable().describe('Null while withheld'),
  from_addresses: z.array(EmailAddress),
  to_addresses: z.array(EmailAddress),
  cc_addresses: z.array(EmailAddress),
  reply_to_addresses: z.array(EmailAddress),
  message_id: z.string().nullable(),
  in_reply_to: z.array(z.string()),
  references: z.array(z.string()),
  delivered_to: z.string().nullable(),
  received_at: Timestamp,
  body_status: z.string().describe('complete, truncated, … or withheld'),
  omitted_attachment_count: z.number().int(),
  attachment_count: z.number().int(),
  delivery: z.record(z.string(), z.unknown()).optional().describe('Sent mail: delivery state (queued, sent, failed …) per recipient'),
  labels: z.array(Label),
  withheld: z.boolean().describe('Content hidden from API keys while labeling is pending or the email is Junk'),
  read: z.boolean(),
  read_at: Timestamp.nullable(),
  read_by: z.object({ id: z.string(), name: z.string().nullable() }).nullable(),
  read_by_api_key: z.object({ id: z.string(), label: z.string().nullable() }).nullable(),
  ...EmailStorage,
};

export const EmailSummary = named(
  'EmailSummary',
  z.object(summary),
  'An email without its body: headers, counts, labels and read state.',
  {
    id: 'eml_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    conversation_id: 'cnv_01JD2Q9K3M4N5P6Q7R8S9T0V1W',
    direction: 'received',
    subject: 'Your receipt',
    from_addresses: [{ address: 'shop@example.com', name: 'Shop' }],
    to_addresses: [{ address: 'receipts-7k2m@cubby.example', name: null }],
    cc_addresses: [],
    reply_to_addresses: [],
    message_id: '<abc@example.com>',
    in_reply_to: [],
    references: [],
    delivered_to: 'receipts-7k2m@cubby.example',
    received_at: '2026-11-24T10:00:00.000Z',
    body_status: 'complete',
    omitted_attachment_count: 0,
    attachment_count: 1,
    labels: [{ id: 'lbl_receipts', name: 'Receipts', color: '#15803d' }],
    withheld: false,
    read: false,
    read_at: null,
    read_by: null,
    read_by_api_key: null,
  },
);

export const EmailAttachment = named(
  'EmailAttachment',
  z.object({
    id: z.string(),
    filename: z.string(),
    content_type: z.string(),
    size_bytes: z.number().int(),
    version_id: z.string(),
    origin: z.string(),
    content_id: z.string().nullable(),
  }),
  'An attachment stored as a file of the mailbox.',
);

export const EmailDetail = named(
  'EmailDetail',
  z.object({ ...summary, body_text: z.string().nullable(), attachments: z.array(EmailAttachment) }),
  'An email with its text body and attachments.',
);

export const EmailList = z.object({ emails: z.array(EmailSummary), pagination: Pagination });
export const EmailSummaryOne = z.object({ email: EmailSummary });
export const EmailDetailOne = z.object({ email: EmailDetail });
export const EmailDownload = z.object({ download: DownloadLink });
