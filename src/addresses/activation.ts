import type { Kysely } from 'kysely';
import type { AppDeps, RequestCtx } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { newId } from '../ids.ts';
import type { NewAddress } from './commit.ts';
import type { JobsTable } from '../db/schema.ts';
import type { Worker } from '../jobs/worker.ts';
import { AppError } from '../errors.ts';
import { iso } from '../time.ts';
import { limitsFor } from '../accounts/limits.service.ts';
import { billingGroupId } from '../accounts/accounts.service.ts';
import { DnsUnavailable, domainResolver, mxExchanges } from '../domains/dns.ts';
import { lockBillingGroup, lockMailbox, type AssignmentRow } from './addresses.repo.ts';
import { commitAlias, commitPrimaryChange } from './commit.ts';

// Activation of a pending assignment (a custom-domain address change or an alias add): the job
// confirms that mail for a custom domain still reaches us (its MX), then commits the change with
// every rule checked again. Success makes the address current; any refusal marks the assignment
// failed with the reason, and the old address simply stays current.

export const ACTIVATE_TASK = 'addresses.activate';
export const ACTIVATE_MAX_ATTEMPTS = 6;

/**
 * Records a pending assignment (an alias add, or a primary change to a custom domain) and queues
 * its activation, in the caller's transaction. The address is reserved by `reserve_key` (unique)
 * but never receivable or shown until activation commits it. Returns the assignment id.
 */
export async function queueAssignment(
  ctx: Pick<RequestCtx, 'jobs' | 'actor'>,
  trx: Kysely<DB>,
  input: { mailboxId: string; accountId: string; kind: 'alias' | 'primary'; next: NewAddress; oldAddress: string | null; keepOldAsAlias: boolean; now: Date },
): Promise<string> {
  const id = newId('asg');
  const address = `${input.next.localPart}@${input.next.hostname}`;
  await trx
    .insertInto('address_assignments')
    .values({
      id,
      mailbox_id: input.mailboxId,
      account_id: input.accountId,
      kind: input.kind,
      status: 'pending',
      hostname: input.next.hostname,
      local_part: input.next.localPart,
      username: input.next.username,
      address,
      reserve_key: address,
      old_address: input.oldAddress,
      keep_old_as_alias: input.keepOldAsAlias ? 1 : 0,
      error: null,
      created_by_user_id: ctx.actor.userId,
      created_by_api_key_id: ctx.actor.apiKeyId,
      created_at: iso(input.now),
      updated_at: iso(input.now),
      finished_at: null,
    })
    .execute();
  await ctx.jobs.enqueue(trx, ACTIVATE_TASK, { assignment_id: id }, { maxAttempts: ACTIVATE_MAX_ATTEMPTS });
  return id;
}

/** Errors a later attempt (or a later request) could get past. */
const RETRYABLE = new Set(['dns_unavailable', 'mx_record_missing', 'EMAIL_DOMAIN_NOT_AVAILABLE', 'INBOUND_EMAIL_ROTATION_LIMIT', 'EMAIL_ALIAS_LIMIT']);

async function finish(deps: AppDeps, a: AssignmentRow, error: { code: string; message: string } | null): Promise<void> {
  const now = iso(deps.now());
  await deps.db
    .updateTable('address_assignments')
    .set({ status: error ? 'failed' : 'active', reserve_key: null, error: error ? JSON.stringify({ ...error, retryable: RETRYABLE.has(error.code) }) : null, updated_at: now, finished_at: now })
    .where('id', '=', a.id)
    .where('status', '=', 'pending')
    .execute();
}

export async function activateAssignment(deps: AppDeps, assignmentId: string, job?: Pick<JobsTable, 'attempts' | 'max_attempts'>): Promise<void> {
  const a = await deps.db.selectFrom('address_assignments').selectAll().where('id', '=', assignmentId).executeTakeFirst();
  if (!a || a.status !== 'pending') return;
  if (a.hostname !== deps.config.mailDomain) {
    let mx: string[];
    try {
      mx = await mxExchanges(domainResolver(deps), a.hostname);
    } catch (err) {
      if (!(err instanceof DnsUnavailable)) throw err;
      // Out of attempts: fail the assignment rather than leave it pending for ever.
      if (job && job.attempts >= job.max_attempts) return finish(deps, a, { code: 'dns_unavailable', message: `DNS for ${a.hostname} could not be queried; try again.` });
      throw err;
    }
    if (!mx.includes(deps.config.mxHost)) return finish(deps, a, { code: 'mx_record_missing', message: `The MX record of ${a.hostname} no longer points at ${deps.config.mxHost}.` });
  }
  const account = await deps.db.selectFrom('accounts').selectAll().where('id', '=', a.account_id).executeTakeFirstOrThrow();
  const mailbox = await deps.db.selectFrom('mailboxes').select(['archived_at', 'deleted_at']).where('id', '=', a.mailbox_id).executeTakeFirst();
  if (!mailbox || mailbox.deleted_at || mailbox.archived_at) return finish(deps, a, { code: 'MAILBOX_NOT_RECEIVING', message: 'The mailbox was archived or deleted before the change took effect.' });
  const limits = limitsFor(account);
  const groupId = billingGroupId(account);
  const now = deps.now();
  const next = { hostname: a.hostname, localPart: a.local_part, username: a.username };
  try {
    await deps.db.transaction().execute(async (trx) => {
      await lockBillingGroup(trx, deps.dialect, groupId);
      await lockMailbox(trx, deps.dialect, a.mailbox_id);
      const still = await trx.selectFrom('address_assignments').select('status').where('id', '=', a.id).executeTakeFirst();
      if (still?.status !== 'pending') return;
      // The reservation is released first so the address row can take the address.
      await trx.updateTable('address_assignments').set({ reserve_key: null }).where('id', '=', a.id).execute();
      const common = { mailboxId: a.mailbox_id, accountId: a.account_id, limits, next, mailDomain: deps.config.mailDomain, dialect: deps.dialect, now };
      if (a.kind === 'primary') await commitPrimaryChange(trx, { ...common, groupId, oldAddress: a.old_address!, keepOldAsAlias: a.keep_old_as_alias === 1 });
      else await commitAlias(trx, common);
      await trx.updateTable('address_assignments').set({ status: 'active', updated_at: iso(now), finished_at: iso(now) }).where('id', '=', a.id).execute();
    });
  } catch (err) {
    if (err instanceof AppError) return finish(deps, a, { code: err.code, message: err.message });
    throw err;
  }
}

export function registerAddressJobs(worker: Worker, deps: AppDeps): void {
  worker.register(ACTIVATE_TASK, { handler: (p: { assignment_id: string }, job) => activateAssignment(deps, p.assignment_id, job), backoffMs: (n) => 10_000 * 2 ** (n - 1) });
}
