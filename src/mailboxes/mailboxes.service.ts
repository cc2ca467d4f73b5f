import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { AppError } from '../errors.ts';
import { isUniqueViolation } from '../db/database.ts';
import { newId, randomToken } from '../ids.ts';
import { iso, nextUtcMonthStart, utcMonthStart } from '../time.ts';
import { recordActivity } from '../activity/activity.service.ts';
import { assertMutable, mailboxPermissions, selectAccount, type AccountAccess, type Permissions } from '../auth/access.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { addressTaken, countGroupCreationsSince, countGroupMailboxes, findMailbox, titleTaken, type MailboxRow } from './mailboxes.repo.ts';
import { generatedUsername, normalizeUsername, randomSuffix, usernameFromText } from './usernames.ts';
import { resolveTargetDomain, type TargetDomain } from '../addresses/targets.ts';
import { addressUnavailable } from '../addresses/addresses.repo.ts';
import { lockClaim } from '../domains/domains.repo.ts';
import { cleanDescription, cleanMetadata, cleanTagPaths, cleanTitle, MAX_TITLE, titleKey } from './mailbox-fields.ts';

export interface LoadedMailbox {
  access: AccountAccess;
  mailbox: MailboxRow;
  perms: Permissions;
}

/**
 * The one way to reach a mailbox: through the selected account and the credential's
 * mailbox permissions. Missing, deleted, foreign and unselected ids all answer
 * MAILBOX_NOT_FOUND; a visible mailbox without the permission answers PERMISSION_DENIED.
 */
export async function loadMailbox(ctx: RequestCtx, accountSelector: string | undefined | null, mailboxId: string, need: keyof Permissions): Promise<LoadedMailbox> {
  const access = await selectAccount(ctx.db, ctx.credential, accountSelector);
  const perms = mailboxPermissions(ctx.credential, access, mailboxId);
  const mailbox = perms && /^bkt_[A-Za-z0-9]{1,64}$/.test(mailboxId) ? await findMailbox(ctx.db, access.account.id, mailboxId) : undefined;
  if (!mailbox || !perms) throw new AppError('MAILBOX_NOT_FOUND', undefined, { mailbox_id: mailboxId });
  if (!perms[need]) throw new AppError('PERMISSION_DENIED', `This credential needs ${need} permission on the mailbox.`, { required: need, mailbox_id: mailboxId });
  return { access, mailbox, perms };
}

export function deleteConfirmation(mailboxId: string): string {
  return `DELETE ${mailboxId}`;
}

function newMetadataVersion(): string {
  return randomToken(16);
}

/** The platform domain (username plus suffix), or a ready custom domain of the account (exact name; src/domains). */
function mailboxDomainOf(ctx: RequestCtx, access: AccountAccess, domain: string | undefined | null, field: string): Promise<TargetDomain> {
  return resolveTargetDomain(ctx, access, domain, ctx.config.mailDomain, field);
}

export interface CreateMailboxInput {
  accountId?: string | null;
  title?: string | null;
  description?: string | null;
  metadata?: unknown;
  tagPaths?: string[];
  username?: string | null;
  domain?: string | null;
  reason?: string | null;
  /** Field prefix for error messages: `mailbox` on surface R, `bucket` on surface A. */
  field: string;
  /**
   * A title another active mailbox holds: `error` (surface R, 409 MAILBOX_TITLE_TAKEN) or
   * `suffix` (surface A: the first free " 2", " 3", … as unarchive does; docs/compat.md).
   */
  titleClash?: 'error' | 'suffix';
  /** Runs inside the creating transaction (idempotency records). */
  onCreated?: (trx: Transaction<DB>, mailboxId: string) => Promise<void>;
}

async function lockBillingGroup(trx: Kysely<DB>, ctx: RequestCtx, groupId: string) {
  // Serialises creations per billing group so that limits hold under concurrency.
  // SQLite transactions are already serial.
  if (ctx.dialect === 'postgres') await trx.selectFrom('accounts').select('id').where('id', '=', groupId).forUpdate().execute();
}

export async function createMailbox(ctx: RequestCtx, input: CreateMailboxInput): Promise<LoadedMailbox> {
  const access = await selectAccount(ctx.db, ctx.credential, input.accountId);
  assertMutable(access);
  // A collaborator limited to chosen mailboxes could not see what they created.
  if (!access.permissions.write || ctx.credential.mailboxAccess !== 'all' || access.mailboxLimit) throw new AppError('MAILBOX_CREATION_NOT_ALLOWED');
  const f = input.field;
  const title = cleanTitle(input.title, `${f}.title`);
  const description = cleanDescription(input.description, `${f}.description`);
  const metadata = input.metadata === undefined ? {} : cleanMetadata(input.metadata, `${f}.metadata`);
  const tagPaths = cleanTagPaths(input.tagPaths, `${f}.tag_paths`);
  const target = await mailboxDomainOf(ctx, access, input.domain, `${f}.email.domain`);
  const domain = target.hostname;
  const givenUsername = input.username?.trim() || null;
  const username = givenUsername ? normalizeUsername(givenUsername, `${f}.email.username`) : (title && usernameFromText(title)) || generatedUsername();
  const effectiveTitle = title ?? givenUsername ?? username;

  const now = ctx.now();
  const groupId = billingGroupId(access.account);
  const limits = limitsFor(access.account);
  for (let attempt = 0; ; attempt++) {
    const id = newId('bkt');
    let storedTitle = effectiveTitle;
    try {
      await ctx.db.transaction().execute(async (trx) => {
        await lockBillingGroup(trx, ctx, groupId);
        if (limits.max_mailboxes !== null && (await countGroupMailboxes(trx, groupId)) >= limits.max_mailboxes) {
          throw new AppError('MAILBOX_LIMIT_REACHED', `The plan allows ${limits.max_mailboxes} mailboxes.`, { limit: 'max_mailboxes', max: limits.max_mailboxes });
        }
        const monthly = limits.max_mailbox_creations_per_month;
        if (monthly !== null && (await countGroupCreationsSince(trx, groupId, utcMonthStart(now))) >= monthly) {
          const resetsAt = nextUtcMonthStart(now);
          throw new AppError('MAILBOX_CREATION_LIMIT_REACHED', undefined, {
            limit: 'max_mailbox_creations_per_month',
            max: monthly,
            resets_at: resetsAt,
            retry_after: Math.ceil((Date.parse(resetsAt) - now.getTime()) / 1000),
          });
        }
        if (await titleTaken(trx, access.account.id, titleKey(effectiveTitle)!)) {
          if (input.titleClash !== 'suffix') throw titleTakenError(effectiveTitle);
          storedTitle = await freeSuffixedTitle(trx, access.account.id, effectiveTitle);
        }
        let localPart = '';
        if (target.custom) {
          // A custom domain takes the exact name, and must still be ready when the address is written.
          localPart = username;
          if (await addressUnavailable(trx, `${localPart}@${domain}`)) throw new AppError('EMAIL_ADDRESS_TAKEN', undefined, { field: `${f}.email.username`, domain });
          const claim = await lockClaim(trx, ctx.dialect, domain);
          if (claim?.account_id !== access.account.id || claim.status !== 'ready') throw new AppError('EMAIL_DOMAIN_NOT_AVAILABLE', undefined, { field: `${f}.email.domain`, domain });
        }
        for (let i = 0; i < 8 && !target.custom; i++) {
          localPart = `${username}-${randomSuffix()}`;
          if (!(await addressTaken(trx, `${localPart}@${domain}`))) break;
        }
        await trx
          .insertInto('mailboxes')
          .values({
            id,
            account_id: access.account.id,
            title: storedTitle,
            title_key: titleKey(storedTitle),
            description,
            metadata: JSON.stringify(metadata),
            metadata_version: newMetadataVersion(),
            tag_paths: JSON.stringify(tagPaths),
            receiving_enabled: 1,
            sending_enabled: 1,
            storage_bytes: 0,
            files_count: 0,
            version_id: null,
            version_number: 0,
            lock_kind: null,
            lock_message: null,
            locked_until: null,
            locked_by_user_id: null,
            locked_by_api_key_id: null,
            lock_progress: null,
            message_count: 0,
            unread_count: 0,
            last_received_at: null,
            last_received_path: null,
            email_seq: 0,
            allowlist_enabled: 0,
            allowlist_entries: '[]',
            allowlist_version: null,
            receiving_blocked_reason: null,
            created_by_user_id: ctx.actor.userId,
            created_by_api_key_id: ctx.actor.apiKeyId,
            archived_at: null,
            deleted_at: null,
            created_at: iso(now),
            updated_at: iso(now),
          })
          .execute();
        await trx
          .insertInto('email_addresses')
          .values({ id: newId('adr'), mailbox_id: id, account_id: access.account.id, local_part: localPart, domain, address: `${localPart}@${domain}`, username, role: 'primary', created_at: iso(now), retired_at: null })
          .execute();
        await trx.insertInto('mailbox_creations').values({ id: newId('mbc'), billing_group_id: groupId, account_id: access.account.id, mailbox_id: id, created_at: iso(now) }).execute();
        await recordActivity(trx, ctx.actor, now, { accountId: access.account.id, action: 'mailbox.create', targetType: 'mailbox', targetId: id, reason: input.reason });
        await input.onCreated?.(trx, id);
      });
    } catch (err) {
      if (isUniqueViolation(err) && /title_key/.test(String((err as any).constraint ?? (err as Error).message))) {
        // A concurrent creation took the same (suffixed) title: look for the next free one.
        if (input.titleClash === 'suffix' && attempt < 5) continue;
        throw titleTakenError(effectiveTitle);
      }
      // A random-suffix collision with a concurrent creation: try again with a new suffix.
      if (isUniqueViolation(err) && /address/.test(String((err as any).constraint ?? (err as Error).message)) && target.custom) throw new AppError('EMAIL_ADDRESS_TAKEN', undefined, { field: `${f}.email.username`, domain });
      if (isUniqueViolation(err) && /address/.test(String((err as any).constraint ?? (err as Error).message)) && attempt < 3) continue;
      throw err;
    }
    // Platform addresses route from the committed row: the address receives now.
    const mailbox = await findMailbox(ctx.db, access.account.id, id);
    if (!mailbox?.address) throw new AppError('EMAIL_NOT_READY', undefined, { mailbox_id: id });
    return { access, mailbox, perms: access.permissions };
  }
}

/** The first free "<title> N" (N = 2, 3, …), the title shortened so the result fits MAX_TITLE. */
async function freeSuffixedTitle(trx: Kysely<DB>, accountId: string, title: string): Promise<string> {
  for (let n = 2; n < 100_000; n++) {
    const suffix = ` ${n}`;
    const candidate = `${title.slice(0, MAX_TITLE - suffix.length).trimEnd()}${suffix}`;
    if (!(await titleTaken(trx, accountId, titleKey(candidate)!))) return candidate;
  }
  throw titleTakenError(title);
}

function titleTakenError(title: string | null) {
  return new AppError('MAILBOX_TITLE_TAKEN', undefined, { title });
}

export interface UpdateMailboxInput {
  accountId?: string | null;
  title?: string | null;
  description?: string | null;
  metadata?: unknown;
  expectedMetadataVersion?: string | null;
  reason?: string | null;
  field: string;
}

export async function updateMailbox(ctx: RequestCtx, mailboxId: string, input: UpdateMailboxInput): Promise<LoadedMailbox> {
  const loaded = await loadMailbox(ctx, input.accountId, mailboxId, 'write');
  assertMutable(loaded.access);
  const m = loaded.mailbox;
  if (m.archived_at) throw new AppError('MAILBOX_ARCHIVED', undefined, { mailbox_id: m.id });
  const f = input.field;
  const patch: Partial<Record<keyof MailboxRow, unknown>> = {};
  if (input.title !== undefined) {
    const title = cleanTitle(input.title, `${f}.title`);
    patch.title = title;
    patch.title_key = titleKey(title);
  }
  let metadataChanged = false;
  if (input.description !== undefined) {
    const description = cleanDescription(input.description, `${f}.description`);
    if (description !== m.description) metadataChanged = true;
    patch.description = description;
  }
  if (input.metadata !== undefined) {
    const metadata = JSON.stringify(cleanMetadata(input.metadata, `${f}.metadata`));
    if (metadata !== m.metadata) metadataChanged = true;
    patch.metadata = metadata;
  }
  if (metadataChanged) patch.metadata_version = newMetadataVersion();
  const now = ctx.now();
  patch.updated_at = iso(now);
  try {
    await ctx.db.transaction().execute(async (trx) => {
      if (patch.title_key && (await titleTaken(trx, m.account_id, patch.title_key as string, m.id))) throw titleTakenError(patch.title as string);
      let q = trx.updateTable('mailboxes').set(patch as any).where('id', '=', m.id).where('archived_at', 'is', null).where('deleted_at', 'is', null);
      // The version check is part of the update itself, so two writers cannot both pass it.
      if (input.expectedMetadataVersion != null) q = q.where('metadata_version', '=', input.expectedMetadataVersion);
      const res = await q.executeTakeFirst();
      if (Number(res.numUpdatedRows) === 0) {
        throw new AppError('MAILBOX_METADATA_CONFLICT', undefined, { mailbox_id: m.id, expected_metadata_version: input.expectedMetadataVersion ?? null });
      }
      await recordActivity(trx, ctx.actor, now, { accountId: m.account_id, action: 'mailbox.update', targetType: 'mailbox', targetId: m.id, reason: input.reason });
    });
  } catch (err) {
    if (isUniqueViolation(err)) throw titleTakenError(patch.title as string);
    throw err;
  }
  return { ...loaded, mailbox: (await findMailbox(ctx.db, m.account_id, m.id))! };
}

export async function archiveMailbox(ctx: RequestCtx, mailboxId: string, input: { accountId?: string | null; reason?: string | null }): Promise<LoadedMailbox> {
  const loaded = await loadMailbox(ctx, input.accountId, mailboxId, 'write');
  assertMutable(loaded.access);
  if (loaded.mailbox.archived_at) return loaded;
  const websiteBlock = () => new AppError('BUCKET_PUBLISHED', undefined, { mailbox_id: mailboxId, site_state: loaded.mailbox.site_state, required_action: 'unpublish_first' });
  if (loaded.mailbox.site_state) throw websiteBlock();
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    // Archived mailboxes give up their title key so an active mailbox may take the title.
    // A website (src/sites) must be unpublished first; checked in the update so a publish racing it loses.
    const res = await trx.updateTable('mailboxes').set({ archived_at: iso(now), title_key: null, updated_at: iso(now) }).where('id', '=', mailboxId).where('site_state', 'is', null).executeTakeFirst();
    if (Number(res.numUpdatedRows) === 0) throw websiteBlock();
    await recordActivity(trx, ctx.actor, now, { accountId: loaded.mailbox.account_id, action: 'mailbox.archive', targetType: 'mailbox', targetId: mailboxId, reason: input.reason });
  });
  return { ...loaded, mailbox: (await findMailbox(ctx.db, loaded.mailbox.account_id, mailboxId))! };
}

export async function unarchiveMailbox(ctx: RequestCtx, mailboxId: string, input: { accountId?: string | null; reason?: string | null }): Promise<LoadedMailbox> {
  const loaded = await loadMailbox(ctx, input.accountId, mailboxId, 'admin');
  assertMutable(loaded.access);
  const m = loaded.mailbox;
  if (!m.archived_at) throw new AppError('MAILBOX_NOT_ARCHIVED', undefined, { mailbox_id: m.id });
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    let title = m.title;
    if (title) {
      // A clash with an active mailbox gets the first free numeric suffix.
      for (let n = 2; await titleTaken(trx, m.account_id, titleKey(title)!); n++) title = `${m.title} ${n}`;
    }
    await trx.updateTable('mailboxes').set({ archived_at: null, title, title_key: titleKey(title), updated_at: iso(now) }).where('id', '=', m.id).execute();
    await recordActivity(trx, ctx.actor, now, { accountId: m.account_id, action: 'mailbox.unarchive', targetType: 'mailbox', targetId: m.id, reason: input.reason });
  });
  return { ...loaded, mailbox: (await findMailbox(ctx.db, m.account_id, m.id))! };
}

export async function deleteMailbox(ctx: RequestCtx, mailboxId: string, input: { accountId?: string | null; confirmation: string; reason?: string | null }) {
  const loaded = await loadMailbox(ctx, input.accountId, mailboxId, 'admin');
  assertMutable(loaded.access);
  const m = loaded.mailbox;
  if (!m.archived_at) {
    throw new AppError('MAILBOX_DELETE_BLOCKED', undefined, { mailbox_id: m.id, blocked_reason: 'not_archived', required_action: 'archive_first' });
  }
  if (input.confirmation !== deleteConfirmation(m.id)) {
    throw new AppError('MAILBOX_DELETE_CONFIRMATION_MISMATCH', undefined, { field: 'confirmation', mailbox_id: m.id });
  }
  const now = ctx.now();
  await ctx.db.transaction().execute(async (trx) => {
    // The mailbox disappears at once; its addresses stay reserved (never reused).
    await trx.updateTable('mailboxes').set({ deleted_at: iso(now), title_key: null, updated_at: iso(now) }).where('id', '=', m.id).execute();
    await trx.updateTable('email_addresses').set({ role: 'retired', retired_at: iso(now) }).where('mailbox_id', '=', m.id).where('role', '!=', 'retired').execute();
    await recordActivity(trx, ctx.actor, now, { accountId: m.account_id, action: 'mailbox.delete', targetType: 'mailbox', targetId: m.id, reason: input.reason });
  });
  return { deleted: true as const, id: m.id };
}

