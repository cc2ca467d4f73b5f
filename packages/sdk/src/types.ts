import type { paths as SurfaceR } from './generated/surface-r.ts';
import type { paths as SurfaceA } from './generated/surface-a.ts';

// Inputs and outputs of every operation come from the types generated from the service's own
// OpenAPI documents (src/generated, `npm run generate`). Where a document does not describe a
// response yet, the hand-written shape below is used instead; once it does, the generated type
// wins (`Out<…>`), so regenerating only ever tightens the types.

export type Paths = SurfaceR & SurfaceA;
export type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';
type Op<P extends keyof Paths, M extends Method> = NonNullable<Paths[P][M & keyof Paths[P]]>;

/** The JSON request body of an operation. */
export type BodyOf<P extends keyof Paths, M extends Method> =
  Op<P, M> extends { requestBody?: { content: { 'application/json': infer B } } } ? B : Record<string, never>;

/** The query parameters of an operation (booleans may be given as booleans: they are sent as text). */
export type QueryOf<P extends keyof Paths, M extends Method> = Op<P, M> extends { parameters: { query?: infer Q } } ? Loose<NonNullable<Q>> : Record<string, never>;
type Loose<Q> = { [K in keyof Q]?: Q[K] extends infer V ? (V extends 'true' | 'false' | '0' | '1' ? V | boolean : V) : never };

type SuccessJson<R> = { [S in keyof R]: S extends 200 | 201 | 202 ? (R[S] extends { content: { 'application/json': infer J } } ? J : never) : never }[keyof R];
type Unwrapped<J> = J extends { data: infer D } ? D : J;

/** The unwrapped `data` of an operation's success answer, or `Fallback` while the document has no schema for it. */
export type Out<P extends keyof Paths, M extends Method, Fallback> = [SuccessJson<Op<P, M> extends { responses: infer R } ? R : never>] extends [never]
  ? Fallback
  : Unwrapped<SuccessJson<Op<P, M> extends { responses: infer R } ? R : never>>;

/** One item of a documented list (`key` of the answer), or `Fallback` while the answer is undocumented. */
export type ItemOf<P extends keyof Paths, M extends Method, K extends string, Fallback> =
  Out<P, M, { [k in K]: Fallback[] }> extends { [k in K]: (infer I)[] } ? I : Fallback;

/** Options every call takes: another granted account for this request, and the reason recorded in the activity log. */
export interface CallOptions {
  accountId?: string;
  reason?: string;
  signal?: AbortSignal;
}

export interface Pagination {
  limit: number;
  has_more: boolean;
  next_cursor: string | null;
}

type Open = { [key: string]: unknown };

export interface Mailbox extends Open {
  id: string;
  account_id: string;
  title: string | null;
  description: string | null;
  metadata: Record<string, unknown>;
  metadata_version: string | number;
  email: { address?: string; message_count: number; unread_count: number; last_received_at: string | null; receiving_enabled: boolean; sending_enabled: boolean } & Open;
  archived: boolean;
  archived_at: string | null;
  storage_bytes: number;
  files_count: number;
  version_id: string | null;
  version_number: number;
  created_at: string;
  updated_at: string;
  dashboard_url: string;
  /** What deleting needs: `confirmation` is the string to pass to mailboxes.delete. */
  delete?: { confirmation?: string } & Open;
}

export interface FileVersion extends Open {
  id: string;
  file_id: string;
  name: string;
  path: string;
  mime_type: string;
  sha256: string;
  byte_size: number;
  version_number: number;
  deleted: boolean;
  created_at: string;
}

export interface MailboxFile extends Open {
  id: string;
  mailbox_id: string;
  basename: string;
  path: string;
  deleted: boolean;
  current_file_version: FileVersion | null;
  created_at: string;
  updated_at: string;
}

export interface FileWrite extends Open {
  file: MailboxFile;
  version: FileVersion | null;
  created?: boolean;
  skipped?: boolean;
  duplicate?: boolean;
}

export interface EmailAddress extends Open {
  address: string;
  name?: string | null;
}

export interface EmailSummary extends Open {
  id: string;
  conversation_id: string | null;
  direction: 'received' | 'sent';
  subject: string | null;
  from_addresses: EmailAddress[];
  to_addresses: EmailAddress[];
  cc_addresses: EmailAddress[];
  received_at: string;
  attachment_count: number;
  read: boolean;
  withheld?: boolean;
}

export interface EmailAttachment extends Open {
  id: string;
  filename: string | null;
  content_type: string;
  size_bytes: number;
}

export interface EmailDetail extends EmailSummary {
  body_text: string | null;
  attachments: EmailAttachment[];
}

export interface DownloadLink extends Open {
  url: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  expires_in: number;
}

export interface UploadTarget {
  url: string;
  headers: Record<string, string>;
}

export interface UploadSession extends Open {
  id: string;
  mailbox_id: string;
  status: 'pending' | 'finalized' | 'failed' | 'expired';
  files_count: number;
  finalized_files_count: number;
  skipped_files_count: number;
  uploads_expire_at: string;
}

export interface UploadSessionResponse extends Open {
  mailbox_upload_session: UploadSession;
  uploads: { input_index: number; path: string; upload: UploadTarget }[];
  skipped: { input_index: number; path: string; reason: string }[];
  uploaded_count: number;
  skipped_count: number;
  finalize_pending: boolean;
  remaining_files_count: number;
}

export interface DirectUpload extends Open {
  signed_id?: string;
  direct_upload?: UploadTarget;
  skipped?: boolean;
  duplicate?: boolean;
  file?: MailboxFile;
}

export interface Webhook extends Open {
  url: string;
  event: string;
  mailbox_id: string;
  signing_secret?: string;
}

export interface WebhookDelivery extends Open {
  id: string;
  event_id: string;
  status: 'pending' | 'retrying' | 'succeeded' | 'failed' | 'cancelled';
  attempt_count: number;
  last_status_code: number | null;
  last_error: string | null;
  created_at: string;
}

export interface LiveTicket {
  token: string;
  expires_in: number;
  channel: string;
  account_id: string;
  mailbox_id: string;
  websocket_url: string;
}

export interface EmailSettings extends Open {
  address?: string;
  username: string | null;
  aliases: { id: string; address: string; active: boolean }[];
  sender_allowlist?: { enabled: boolean; entries: string[]; version: string } & Open;
}

export interface EmailDomain extends Open {
  id: string;
  hostname: string;
  status: string;
  required_dns_records?: { type: string; name: string; value: string; purpose: string; [key: string]: unknown }[];
}

export interface Publication extends Open {
  id: string;
  bucket_id: string;
  kind?: string;
  publish_state: 'queued' | 'processing' | 'ready' | 'failed' | 'unpublishing' | 'unpublished';
  publish_error: string | null;
  public_url: string | null;
  access_mode: 'public' | 'password' | 'require_email';
  /** The owner's view of a ready password-protected site. */
  password?: string;
  share_text?: string;
}

export interface Status extends Open {
  connected: boolean;
  account: Open & { id: string; name: string };
  default_account_id: string;
  user: { id: string; email: string; name: string } | null;
  server_version: string;
}

export interface Deleted extends Open {
  deleted: true;
  id: string;
}

/** The `webhook` body of an `email.received` event (webhooks and live pushes alike). */
export interface EmailReceivedEvent {
  id: string;
  type: 'email.received';
  created_at: string;
  data: { account_id: string; mailbox_id: string; email_id: string; received_at: string; attachment_count: number };
}
