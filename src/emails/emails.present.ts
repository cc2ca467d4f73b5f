import type { Kysely } from 'kysely';
import type { DB, EmailsTable } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { labelsOf } from '../labels/categories.ts';
import { loadActors, type Actors } from '../files/files.present.ts';

// Email row → API object. The withheld rule lives here: an email still being labeled, or labeled
// Junk, is shown to API keys without its content (subject, display names, the sender's address
// except its domain, body, attachments). Counts, ids and dates stay, so clients can keep the id and
// read it again later.

export interface EmailAddress {
  address: string;
  name: string | null;
}

/** One element of the row's `attachments` JSON (written by src/inbound/store.ts). */
export interface StoredAttachment {
  id: string;
  filename: string;
  content_type: string;
  size_bytes: number;
  version_id: string;
  origin: string;
  content_id: string | null;
}

/** Who is looking: only API-key requests have content withheld; include_storage adds file ids. */
export interface Viewer {
  apiKey: boolean;
  includeStorage: boolean;
}

/**
 * A request authenticated by an API key (dashboard keys, agent keys and OAuth tokens are all rows
 * of api_keys) has `actor.apiKeyId`; a person signed in to the dashboard has none.
 */
export function viewerOf(ctx: Pick<RequestCtx, 'actor'>, includeStorage = false): Viewer {
  return { apiKey: ctx.actor.apiKeyId !== null, includeStorage };
}

export function labelingPending(row: Pick<EmailsTable, 'labeling'>): boolean {
  return row.labeling === 'pending';
}

export function isJunk(row: Pick<EmailsTable, 'label'>): boolean {
  return row.label === 'Junk';
}

export function isWithheld(row: Pick<EmailsTable, 'labeling' | 'label'>, viewer: Pick<Viewer, 'apiKey'>): boolean {
  return viewer.apiKey && (labelingPending(row) || isJunk(row));
}

/** Parses a JSON array column; anything else (never expected) reads as empty rather than failing a whole list. */
export function jsonArray<T>(text: string | null): T[] {
  if (!text) return [];
  try {
    const v = JSON.parse(text);
    return Array.isArray(v) ? (v as T[]) : [];
  } catch {
    return [];
  }
}

export function attachmentsOf(row: Pick<EmailsTable, 'attachments'>): StoredAttachment[] {
  return jsonArray<StoredAttachment>(row.attachments);
}

/** `"@example.com"`: the part of a withheld sender that stays visible (the domain, lower-cased). */
export function domainOnly(address: string): string {
  const at = address.lastIndexOf('@');
  return at >= 0 ? `@${address.slice(at + 1).toLowerCase()}` : '@';
}

function addresses(text: string, withheld: boolean, senderSide: boolean): EmailAddress[] {
  return jsonArray<EmailAddress>(text)
    .filter((a) => a && typeof a.address === 'string')
    .map((a) => ({
      // From and Reply-To are chosen by the sender: withheld, only their domains remain.
      address: withheld && senderSide ? domainOnly(a.address) : a.address,
      name: withheld ? null : (a.name ?? null),
    }));
}

function readFields(row: EmailsTable, actors: Actors) {
  const user = row.read_by_user_id ? actors.users.get(row.read_by_user_id) : undefined;
  const key = row.read_by_api_key_id ? actors.keys.get(row.read_by_api_key_id) : undefined;
  return {
    read: row.read_at !== null,
    read_at: row.read_at,
    read_by: user ? { id: user.id, name: user.name } : null,
    read_by_api_key: key ? { id: key.id, label: key.label } : null,
  };
}

function storageFields(row: EmailsTable, withheld: boolean) {
  return {
    file_id: row.raw_file_id,
    version_id: row.raw_version_id,
    files: {
      body_id: row.json_file_id,
      original_id: row.raw_file_id,
      attachment_ids: withheld ? [] : attachmentsOf(row).map((a) => a.id),
      directory: row.directory,
    },
  };
}

export function presentSummary(row: EmailsTable, viewer: Viewer, actors: Actors) {
  const withheld = isWithheld(row, viewer);
  return {
    id: row.id,
    conversation_id: row.conversation_id,
    direction: row.direction,
    subject: withheld ? null : row.subject,
    from_addresses: addresses(row.from_addresses, withheld, true),
    to_addresses: addresses(row.to_addresses, withheld, false),
    cc_addresses: addresses(row.cc_addresses, withheld, false),
    reply_to_addresses: addresses(row.reply_to_addresses, withheld, true),
    message_id: row.message_id,
    in_reply_to: jsonArray<string>(row.in_reply_to),
    references: jsonArray<string>(row.reference_ids),
    delivered_to: row.delivered_to,
    received_at: row.received_at,
    body_status: withheld ? 'withheld' : row.body_status,
    omitted_attachment_count: Number(row.omitted_attachment_count),
    attachment_count: Number(row.attachment_count),
    ...(row.direction === 'sent' && row.delivery ? { delivery: JSON.parse(row.delivery) } : {}),
    labels: labelsOf(row.label),
    withheld,
    ...readFields(row, actors),
    ...(viewer.includeStorage ? storageFields(row, withheld) : {}),
  };
}

export function presentDetail(row: EmailsTable, viewer: Viewer, actors: Actors) {
  const summary = presentSummary(row, viewer, actors);
  return {
    ...summary,
    body_text: summary.withheld ? null : row.body_text,
    attachments: summary.withheld
      ? []
      : attachmentsOf(row).map((a) => ({ id: a.id, filename: a.filename, content_type: a.content_type, size_bytes: Number(a.size_bytes), version_id: a.version_id, origin: a.origin, content_id: a.content_id ?? null })),
  };
}

function actorsFor(db: Kysely<DB>, rows: EmailsTable[]): Promise<Actors> {
  return loadActors(db, { userIds: rows.map((r) => r.read_by_user_id), keyIds: rows.map((r) => r.read_by_api_key_id) });
}

/** Presents a page of emails with one query per related table. */
export async function presentSummaries(db: Kysely<DB>, rows: EmailsTable[], viewer: Viewer) {
  const actors = await actorsFor(db, rows);
  return rows.map((r) => presentSummary(r, viewer, actors));
}

export async function presentOneSummary(db: Kysely<DB>, row: EmailsTable, viewer: Viewer) {
  return presentSummary(row, viewer, await actorsFor(db, [row]));
}

export async function presentOneDetail(db: Kysely<DB>, row: EmailsTable, viewer: Viewer) {
  return presentDetail(row, viewer, await actorsFor(db, [row]));
}
