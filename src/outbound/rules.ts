import type { Kysely } from 'kysely';
import type { DB, EmailsTable } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { senderAuthenticated, type StoredAuthResults } from '../inbound/authenticate.ts';
import { jsonArray, type EmailAddress } from '../emails/emails.present.ts';

// Who a mailbox may write to (spec "Send rules"): account members, other mailboxes of the same
// account, and on paid plans addresses that emailed this mailbox and passed sender authentication.

const domainOf = (address: string) => address.slice(address.lastIndexOf('@') + 1).toLowerCase();

/** Relaxed alignment (RFC 7489 §3.1): the same domain, or one a subdomain of the other. */
function aligned(a: string, b: string): boolean {
  return a === b || a.endsWith(`.${b}`) || b.endsWith(`.${a}`);
}

/**
 * Did this received email prove its From address? DMARC pass does (it checks the From domain).
 * SPF alone authenticates only the envelope sender's domain, which a forger chooses freely while
 * putting any From on the message: SPF counts only when that domain aligns with the From domain.
 */
export function fromAuthenticated(row: Pick<EmailsTable, 'auth_results' | 'sender_address'>): boolean {
  if (!row.auth_results || !row.sender_address) return false;
  let auth: StoredAuthResults & { spf?: { domain?: string | null } | null };
  try {
    auth = JSON.parse(row.auth_results);
  } catch {
    return false;
  }
  if (!senderAuthenticated(auth)) return false;
  if (auth.dmarc?.result === 'pass') return true;
  const spfDomain = auth.spf?.domain?.toLowerCase();
  return !!spfDomain && aligned(spfDomain, domainOf(row.sender_address));
}

/** The reply default: the original's first From address when it authenticated, else null. */
export function replyDefault(original: EmailsTable): string | null {
  const from = jsonArray<EmailAddress>(original.from_addresses)[0]?.address?.toLowerCase();
  if (!from || from !== original.sender_address || !fromAuthenticated(original)) return null;
  return from;
}

export interface SenderMailbox {
  mailboxId: string;
  accountId: string;
  paid: boolean;
}

/**
 * Refuses the first recipient that the rules do not allow, with a code saying why:
 * EMAIL_RECIPIENT_NOT_ALLOWED (unknown, or this mailbox's own address), EMAIL_RECIPIENT_UNAUTHENTICATED
 * (emailed us but never passed authentication), EMAIL_RECIPIENT_PLAN_REQUIRED (authenticated outside
 * sender, free plan). Reply-To never authorizes: only the authenticated From of received mail counts,
 * and mail labeled Junk does not count at all.
 */
export async function assertRecipientsAllowed(db: Kysely<DB>, sender: SenderMailbox, addresses: string[]): Promise<void> {
  const members = new Set(
    (await db.selectFrom('memberships').innerJoin('users', 'users.id', 'memberships.user_id').select('users.email').where('memberships.account_id', '=', sender.accountId).execute()).map((r) => r.email.toLowerCase()),
  );
  const ours = await db
    .selectFrom('email_addresses')
    .innerJoin('mailboxes', 'mailboxes.id', 'email_addresses.mailbox_id')
    .select(['email_addresses.address', 'email_addresses.mailbox_id'])
    .where('email_addresses.account_id', '=', sender.accountId)
    .where('email_addresses.address', 'in', addresses)
    .where('email_addresses.role', '!=', 'retired')
    .where('mailboxes.deleted_at', 'is', null)
    .execute();
  const own = new Set(ours.filter((r) => r.mailbox_id === sender.mailboxId).map((r) => r.address));
  const siblings = new Set(ours.filter((r) => r.mailbox_id !== sender.mailboxId).map((r) => r.address));
  const rest = addresses.filter((a) => !members.has(a) && !siblings.has(a) && !own.has(a));
  const received = rest.length
    ? await db
        .selectFrom('emails')
        .select(['sender_address', 'auth_results'])
        .where('mailbox_id', '=', sender.mailboxId)
        .where('direction', '=', 'received')
        .where('sender_address', 'in', rest)
        .where((eb) => eb.or([eb('label', 'is', null), eb('label', '!=', 'Junk')]))
        .orderBy('seq', 'desc')
        .limit(500)
        .execute()
    : [];
  for (const address of addresses) {
    if (members.has(address) || siblings.has(address)) continue;
    if (own.has(address)) throw new AppError('EMAIL_RECIPIENT_NOT_ALLOWED', `${address} is this mailbox's own address.`, { address, reason: 'own_address' });
    const mail = received.filter((r) => r.sender_address === address);
    if (!mail.length) throw new AppError('EMAIL_RECIPIENT_NOT_ALLOWED', undefined, { address, reason: 'not_a_known_correspondent' });
    if (!mail.some(fromAuthenticated)) throw new AppError('EMAIL_RECIPIENT_UNAUTHENTICATED', undefined, { address });
    if (!sender.paid) throw new AppError('EMAIL_RECIPIENT_PLAN_REQUIRED', undefined, { address });
  }
}
