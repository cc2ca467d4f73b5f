/** The job that labels one received email (payload `{ email_id }`); see src/labels/labeler.ts. */
export const LABEL_EMAIL_TASK = 'labels.label_email';
