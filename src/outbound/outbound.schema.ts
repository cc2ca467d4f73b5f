// Row types of the sending feature (migration 0008), merged into the DB interface.

export type OutboundKind = 'email' | 'system';
/** Per-recipient delivery state; `sending` is internal (shown as `queued`). */
export type RecipientStatus = 'queued' | 'sending' | 'sent' | 'deferred' | 'failed' | 'bounced';

export interface OutboundMessagesTable {
  id: string;
  kind: OutboundKind;
  mailbox_id: string | null;
  account_id: string | null;
  envelope_from: string;
  /** Message-ID without brackets. */
  message_id: string;
  raw_sha256: string | null;
  sealed_raw: string | null;
  created_at: string;
}

export interface OutboundRecipientsTable {
  message_id: string;
  address: string;
  position: number;
  status: RecipientStatus;
  attempts: number;
  /** The remote (or local) reply of the last attempt, one line. */
  last_reply: string | null;
  /** `local`, `relay` or `mx:<host>` of the last attempt. */
  route: string | null;
  attempt_started_at: string | null;
  sent_at: string | null;
  updated_at: string;
}

export interface SentRecipientsUsageTable {
  scope_id: string;
  period: string;
  address: string;
  created_at: string;
}

export interface DkimKeysTable {
  domain: string;
  selector: string;
  sealed_private_key: string;
  public_key: string;
  created_at: string;
}

declare module '../db/schema.ts' {
  interface DB {
    outbound_messages: OutboundMessagesTable;
    outbound_recipients: OutboundRecipientsTable;
    sent_recipients_usage: SentRecipientsUsageTable;
    dkim_keys: DkimKeysTable;
  }
}
