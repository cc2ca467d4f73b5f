// The one error catalogue. Every error the service returns has a code here;
// the code decides the HTTP status. Clients branch on the code, never the message.
export const ERROR_CATALOGUE = {
  // generic request problems
  INVALID_ARGUMENT: { status: 422, message: 'A request field is invalid.' },
  MALFORMED_JSON: { status: 400, message: 'The request body is not valid JSON.' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, message: 'Send the request body as application/json.' },
  PAYLOAD_TOO_LARGE: { status: 413, message: 'The request body is too large.' },
  NOT_FOUND: { status: 404, message: 'No such route.' },
  METHOD_NOT_ALLOWED: { status: 405, message: 'Method not allowed on this route.' },
  RATE_LIMITED: { status: 429, message: 'Too many requests; retry after the given number of seconds.' },
  SERVICE_UNAVAILABLE: { status: 503, message: 'The service is temporarily unavailable; retry later.' },
  INTERNAL: { status: 500, message: 'Internal error. Quote the request id to support.' },
  // authentication and access
  UNAUTHENTICATED: { status: 401, message: 'Missing or invalid API key.' },
  API_KEY_EXPIRED: { status: 401, message: 'This API key has expired.' },
  API_KEY_REVOKED: { status: 401, message: 'This API key has been revoked.' },
  ACCOUNT_ACCESS_DENIED: { status: 403, message: 'This credential cannot use that account.' },
  PERMISSION_DENIED: { status: 403, message: 'This credential lacks the permission for this operation.' },
  MCP_HOST_NOT_ALLOWED: { status: 403, message: 'This Host is not served here; the operator can add it to CUBBY_MCP_ALLOWED_HOSTS or set CUBBY_PUBLIC_URL.' },
  MCP_ORIGIN_NOT_ALLOWED: { status: 403, message: 'Requests from this Origin are refused; the operator can add its host to CUBBY_MCP_ALLOWED_HOSTS.' },
  AGENCY_OWNER_REQUIRED: { status: 403, message: 'Only an agency owner credential with client-account access can do this.' },
  ACCOUNT_CAPACITY_REACHED: { status: 403, message: 'The agency has reached its account or member capacity.' },
  ACCOUNT_READ_ONLY: { status: 423, message: 'The account is read-only; reads work, changes are refused.' },
  ACCOUNT_SUSPENDED: { status: 403, message: 'The account is suspended; changes are refused.' },
  REASON_CONTAINS_SECRET: { status: 422, message: 'The reason looks like it contains a credential; remove it.' },
  IDEMPOTENCY_KEY_CONFLICT: { status: 409, message: 'This Idempotency-Key was used with a different request.' },
  // accounts
  ACCOUNT_NOT_FOUND: { status: 404, message: 'Account not found.' },
  // mailboxes and buckets
  MAILBOX_NOT_FOUND: { status: 404, message: 'Mailbox not found.' },
  BUCKET_NOT_FOUND: { status: 404, message: 'Bucket not found.' },
  MAILBOX_TITLE_TAKEN: { status: 409, message: 'Another active mailbox already has this title.' },
  MAILBOX_METADATA_CONFLICT: { status: 409, message: 'expected_metadata_version is stale; read the mailbox and retry.' },
  MAILBOX_NOT_ARCHIVED: { status: 409, message: 'The mailbox is not archived.' },
  MAILBOX_ARCHIVED: { status: 409, message: 'The mailbox is archived and read-only; unarchive it first.' },
  MAILBOX_DELETE_BLOCKED: { status: 409, message: 'Archive the mailbox before deleting it.' },
  MAILBOX_DELETE_CONFIRMATION_MISMATCH: { status: 422, message: 'confirmation must equal delete.confirmation from a mailbox read.' },
  MAILBOX_LIMIT_REACHED: { status: 403, message: 'The plan allows no more mailboxes.' },
  MAILBOX_CREATION_LIMIT_REACHED: { status: 429, message: 'The monthly mailbox-creation allowance is used up.' },
  MAILBOX_CREATION_NOT_ALLOWED: { status: 403, message: 'This credential cannot create mailboxes (it needs write scope and access to all mailboxes).' },
  EMAIL_NOT_READY: { status: 409, message: 'The mailbox was created but its address is not receiving yet; read it, do not create it again.' },
  EMAIL_USERNAME_INVALID: { status: 422, message: 'The email username is invalid.' },
  EMAIL_USERNAME_RESERVED: { status: 422, message: 'That email username is reserved.' },
  // files and uploads
  MAILBOX_FILE_NOT_FOUND: { status: 404, message: 'File not found.' },
  MAILBOX_VERSION_CONFLICT: { status: 409, message: 'expected_mailbox_version differs from the current version; nothing was saved.' },
  MAILBOX_LOCKED: { status: 409, message: 'A batch upload holds the mailbox write lock; retry after it finishes.' },
  EMAIL_PATH_READ_ONLY: { status: 403, message: 'Files under _email/ are read-only; delete the email instead.' },
  FILE_TYPE_FORBIDDEN: { status: 422, message: 'Executables and secret or key files are not stored.' },
  FILE_PATH_TAKEN: { status: 409, message: 'Another file already has this path.' },
  FILE_VERSION_NOT_FOUND: { status: 404, message: 'File version not found.' },
  FILE_TOO_LARGE: { status: 413, message: 'The file is larger than the plan allows.' },
  FILE_LIMIT_REACHED: { status: 403, message: 'The plan allows no more files.' },
  STORAGE_LIMIT_REACHED: { status: 403, message: 'The plan storage allowance is used up.' },
  FILE_VERSION_LIMIT_REACHED: { status: 403, message: 'The file has as many versions as the plan allows.' },
  DIRECT_UPLOAD_NOT_FOUND: { status: 409, message: 'The bytes for this upload are not there yet; upload them again, then retry.' },
  DIRECT_UPLOAD_INVALID: { status: 422, message: 'signed_blob_id is not a valid, unexpired upload of this mailbox.' },
  UPLOAD_CHECKSUM_MISMATCH: { status: 422, message: 'The uploaded bytes do not match the declared size or checksums.' },
  UPLOAD_URL_EXPIRED: { status: 403, message: 'This upload URL has expired or was used already; request a new one.' },
  DOWNLOAD_LINK_INVALID: { status: 403, message: 'This download link is invalid or has expired.' },
  UPLOAD_SESSION_NOT_FOUND: { status: 404, message: 'Upload session not found.' },
  UPLOAD_SESSION_CLOSED: { status: 409, message: 'The upload session is no longer pending.' },
  EMAIL_DOMAIN_NOT_AVAILABLE: { status: 422, message: 'That domain is not available to this account.' },
  // emails
  EMAIL_NOT_FOUND: { status: 404, message: 'Email not found.' },
  EMAIL_ATTACHMENT_NOT_FOUND: { status: 404, message: 'Attachment not found.' },
  EMAIL_LABELING_PENDING: { status: 503, message: 'The email is still being labeled; read it again after Retry-After seconds.' },
  EMAIL_WITHHELD: { status: 403, message: 'This email is withheld (junk); its content and files are not available to API keys.' },
  // receiving over SMTP (the status is for API use; `smtp` is the reply the SMTP server sends)
  RECIPIENT_UNKNOWN: { status: 404, message: 'No mailbox has this address.', smtp: { code: 550, enhanced: '5.1.1' } },
  RECIPIENT_NOT_LOCAL: { status: 403, message: 'Relaying is not allowed; send only to addresses of this service.', smtp: { code: 550, enhanced: '5.7.1' } },
  MAILBOX_NOT_RECEIVING: { status: 403, message: 'This mailbox is not receiving email.', smtp: { code: 550, enhanced: '5.2.1' } },
  SENDER_NOT_ALLOWED: { status: 403, message: 'The sender is not on this mailbox\'s allowlist.', smtp: { code: 550, enhanced: '5.7.1' } },
  RECEIVED_EMAIL_LIMIT_REACHED: { status: 429, message: 'The monthly received-email allowance is used up; try again next month.', smtp: { code: 452, enhanced: '4.2.2' } },
  RECEIVED_BYTES_LIMIT_REACHED: { status: 429, message: 'The monthly received-email storage allowance is used up.', smtp: { code: 552, enhanced: '5.2.2' } },
  MESSAGE_TOO_LARGE: { status: 413, message: 'The message is larger than this mailbox accepts.', smtp: { code: 552, enhanced: '5.3.4' } },
  STORAGE_UNAVAILABLE: { status: 503, message: 'The message could not be stored; try again later.', smtp: { code: 451, enhanced: '4.3.0' } },
  // sending email (src/outbound)
  EMAIL_SENDING_DISABLED: { status: 403, message: 'This mailbox cannot send email now; see email.sending_blocked_reason.' },
  EMAIL_RECIPIENT_REQUIRED: { status: 422, message: 'Give `to`: the original sender did not pass SPF or DMARC, so a reply does not default to it.' },
  EMAIL_TOO_MANY_RECIPIENTS: { status: 422, message: 'At most 10 addresses in to and cc together.' },
  EMAIL_BODY_TOO_LARGE: { status: 422, message: 'text and html are limited to 1 MiB each.' },
  EMAIL_ATTACHMENTS_TOO_LARGE: { status: 422, message: 'The attachments are larger than a sent email may carry.' },
  EMAIL_REPLY_TARGET_INVALID: { status: 422, message: 'in_reply_to must be the id of an email this mailbox received.' },
  EMAIL_RECIPIENT_NOT_ALLOWED: { status: 403, message: 'Recipients may only be account members, other mailboxes of this account, or (paid plans) authenticated senders who emailed this mailbox.' },
  EMAIL_RECIPIENT_UNAUTHENTICATED: { status: 403, message: 'This address emailed the mailbox but never passed sender authentication (SPF or DMARC aligned with From), so it cannot be written to.' },
  EMAIL_RECIPIENT_PLAN_REQUIRED: { status: 403, message: 'Writing to outside senders who emailed this mailbox needs a paid plan.' },
  EMAIL_SEND_LIMIT_REACHED: { status: 429, message: 'The monthly sent-email recipient allowance is used up.' },
  EMAIL_SEND_RATE_LIMITED: { status: 429, message: 'This mailbox is sending too fast; wait a while before sending again.' },
  // addresses, aliases, sender allowlist and custom receiving domains (src/addresses, src/domains)
  EMAIL_ALIAS_LIMIT: { status: 409, message: 'No free alias slot on this mailbox; send keep_old_as_alias=false to retire the old address, or delete an alias.' },
  EMAIL_ALIAS_NOT_FOUND: { status: 404, message: 'Alias not found.' },
  EMAIL_ADDRESS_CHANGED: { status: 409, message: 'expected_address is not the current address; read the email settings and retry.' },
  EMAIL_ADDRESS_TAKEN: { status: 409, message: 'That address is taken; choose another username.' },
  EMAIL_ADDRESS_CHANGE_PENDING: { status: 409, message: 'An address change of this mailbox is still activating; read the settings until assignment.status is active or failed.' },
  EMAIL_CUSTOMIZATION_UNAVAILABLE: { status: 403, message: 'Changing addresses and adding aliases needs a paid plan (and, for aliases, an account owner or administrator).' },
  SENDER_ALLOWLIST_CONFLICT: { status: 409, message: 'expected_version is stale; read sender_allowlist.version and retry.' },
  INBOUND_EMAIL_ADDRESS_CHANGED: { status: 409, message: 'current_address is not the current address; read inbound_email before retrying.' },
  INBOUND_EMAIL_ROTATION_UNAVAILABLE: { status: 409, message: 'The address cannot be rotated in its current state; read inbound_email before retrying.' },
  INBOUND_EMAIL_ROTATION_LIMIT: { status: 429, message: 'The plan allows no more address rotations this month.' },
  EMAIL_DOMAIN_NOT_FOUND: { status: 404, message: 'Email domain not found.' },
  EMAIL_DOMAINS_NOT_ENABLED: { status: 403, message: 'Custom email domains are an invitation-only paid pilot; this account does not have them.' },
  EMAIL_DOMAIN_LIMIT_REACHED: { status: 403, message: 'The plan allows no more custom email domains.' },
  EMAIL_DOMAIN_CONFLICT: { status: 422, message: 'This hostname cannot be claimed: it is claimed already, or its DNS already routes mail elsewhere.' },
  EMAIL_DOMAIN_IN_USE: { status: 409, message: 'Mailbox addresses still use this domain; move or delete them first.' },
  EMAIL_DOMAIN_SETUP_RATE_LIMITED: { status: 429, message: 'Too many domain setup requests; retry after the given number of seconds.' },
  EMAIL_DOMAIN_DNS_UNAVAILABLE: { status: 503, message: 'DNS could not be queried just now; retry later.' },
  // agent access (email code, grants, OAuth connections)
  ACCOUNT_ADMIN_REQUIRED: { status: 403, message: 'Only an account owner or administrator can connect an agent.' },
  // members, invitations and sign-in security (browser pages and `cubby admin`)
  MEMBER_ADMIN_REQUIRED: { status: 403, message: 'Only an owner or administrator of the account can do this.' },
  MEMBER_OWNER_REQUIRED: { status: 403, message: 'Only an owner of the account can grant, change or remove the owner role.' },
  MEMBER_NOT_FOUND: { status: 404, message: 'This person is not a member of the account.' },
  MEMBER_ALREADY_EXISTS: { status: 409, message: 'This person is already a member of the account.' },
  MEMBER_LIMIT_REACHED: { status: 403, message: 'The plan allows no more members (pending invitations count too).' },
  LAST_OWNER: { status: 409, message: 'An account keeps at least one owner: make someone else owner first.' },
  INVITATION_INVALID: { status: 404, message: 'This invitation link is not valid. Ask for a new invitation.' },
  INVITATION_EXPIRED: { status: 410, message: 'This invitation has expired. Ask for a new invitation.' },
  INVITATION_USED: { status: 410, message: 'This invitation was already used or withdrawn.' },
  INVITATION_WRONG_EMAIL: { status: 403, message: 'This invitation was sent to another email address. Sign in with that address.' },
  SIGN_UP_CLOSED: { status: 403, message: 'Sign-up on this instance is by invitation only.' },
  EMAIL_NOT_VERIFIED: { status: 403, message: 'Confirm your email address first: follow the link Cubby sent you (or ask for a new one on the account page).' },
  TWO_FACTOR_REQUIRED: { status: 403, message: 'This person signs in with two-factor authentication; email codes are refused. Sign in in the browser instead.' },
  SIGN_IN_CODE_INVALID: { status: 422, message: 'The code is wrong, expired or already used; request a new one.' },
  GRANT_INVALID: { status: 422, message: 'The connection code is invalid, expired or already used; make a new one in the dashboard.' },
  CONNECTION_NOT_FOUND: { status: 404, message: 'Connection not found.' },
  // website publishing (src/sites)
  WEBSITE_PUBLISHING_DISABLED: { status: 403, message: 'Website publishing is disabled for this account; an operator can enable it.' },
  PUBLICATION_UPGRADE_REQUIRED: { status: 403, message: 'This setting needs a paid plan on the main site; publish a preview, upgrade, or publish publicly.' },
  PUBLICATION_NOT_FOUND: { status: 404, message: 'Publication not found.' },
  PUBLICATION_NOT_RETRYABLE: { status: 409, message: 'Only a failed build can be retried.' },
  SITE_SLUG_TAKEN: { status: 409, message: 'Another bucket already uses this site slug.' },
  SITE_LIMIT_REACHED: { status: 403, message: 'The plan allows no more live websites.' },
  ANALYTICS_RANGE_INVALID: { status: 422, message: 'The analytics range is invalid: from and to are dates or ISO 8601 times with a zone, from before to, within the longest range of the granularity.' },
  ANALYTICS_GRANULARITY_INVALID: { status: 422, message: 'granularity must be hour or day.' },
  BUCKET_PUBLISHED: { status: 409, message: 'The bucket has a website; unpublish it and wait until publish_state is no longer unpublishing.' },
  // webhooks and the live subscription (src/webhooks, src/live)
  EMAIL_WEBHOOK_NOT_FOUND: { status: 404, message: 'This mailbox has no webhook; set its URL first.' },
  INVALID_EMAIL_WEBHOOK: { status: 422, message: 'webhook_url must be a public HTTPS URL of at most 2048 bytes, without user name, password or fragment.' },
} as const;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export class AppError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message?: string,
    readonly details: Record<string, unknown> = {},
    /** Extra top-level fields on the error object, e.g. `read_only: true`. */
    readonly extra: Record<string, unknown> = {},
  ) {
    super(message ?? ERROR_CATALOGUE[code].message);
    this.status = ERROR_CATALOGUE[code].status;
  }
}

export function invalidArgument(field: string, message: string, details: Record<string, unknown> = {}): AppError {
  return new AppError('INVALID_ARGUMENT', `${field}: ${message}`, { field, ...details });
}
