/** The job that labels one received email (payload `{ email_id }`); see src/labels/labeler.ts. */
export const LABEL_EMAIL_TASK = 'labels.label_email';

/** How the inbound pipeline asks for labeling: one coalesced job labels whatever is pending. */
export const LABEL_PENDING_JOB = { payload: { pending: true }, uniqueKey: 'coalesce:labels.label_email' } as const;
