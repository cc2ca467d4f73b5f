// Row types of the webhook tables (migration 0007_webhooks_live), added to the DB interface.

export type DeliveryStatus = 'pending' | 'retrying' | 'succeeded' | 'failed' | 'cancelled';
export type AttemptOutcome = 'succeeded' | 'retry' | 'failed';

/** One webhook per mailbox. */
export interface WebhooksTable {
  id: string;
  mailbox_id: string;
  account_id: string;
  url: string;
  /** The `whsec_…` signing secret, AES-GCM encrypted (src/webhooks/secrets.ts). */
  secret_ciphertext: string;
  secret_created_at: string;
  created_at: string;
  updated_at: string;
  /** The dispatch job that may make first attempts now (first attempts go one at a time, in order). */
  dispatch_job_id: string | null;
  dispatch_until: string | null;
}

/** One event on its way to one webhook. */
export interface WebhookDeliveriesTable {
  id: string;
  webhook_id: string;
  mailbox_id: string;
  account_id: string;
  event_id: string;
  event_type: string;
  status: DeliveryStatus;
  attempts: number;
  next_attempt_at: string | null;
  last_status_code: number | null;
  last_error: string | null;
  /** The queued retry job, cancelled with the delivery. */
  job_id: string | null;
  created_at: string;
  updated_at: string;
  finished_at: string | null;
}

/** The per-attempt log the mailbox owner reads. */
export interface WebhookAttemptsTable {
  id: string;
  delivery_id: string;
  mailbox_id: string;
  attempt: number;
  url: string;
  started_at: string;
  duration_ms: number;
  status_code: number | null;
  error: string | null;
  outcome: AttemptOutcome;
  next_attempt_at: string | null;
}

declare module '../db/schema.ts' {
  interface DB {
    webhooks: WebhooksTable;
    webhook_deliveries: WebhookDeliveriesTable;
    webhook_attempts: WebhookAttemptsTable;
  }
}
