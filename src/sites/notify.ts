import type { Kysely } from 'kysely';
import type { AppDeps } from '../context.ts';
import type { DB } from '../db/schema.ts';
import { sendSystemMail } from '../outbound/system-mail.ts';
import type { PublicationsTable } from './sites.schema.ts';
import { publicUrlOf } from './publications.present.ts';

// The publish-failed notice: mailed to the account's owners in the transaction that records the
// failure (the outbox), so it goes exactly when the failure is committed.

export async function notifyPublishFailed(deps: AppDeps, trx: Kysely<DB>, p: PublicationsTable, bucketTitle: string | null, error: string): Promise<void> {
  const owners = await trx
    .selectFrom('memberships')
    .innerJoin('users', 'users.id', 'memberships.user_id')
    .select('users.email')
    .where('memberships.account_id', '=', p.account_id)
    .where('memberships.role', '=', 'owner')
    .orderBy('users.email')
    .limit(10)
    .execute();
  const what = p.kind === 'preview' ? 'preview' : 'website';
  const name = bucketTitle ?? p.mailbox_id;
  const text = [
    `Publishing the ${what} of "${name}" failed.`,
    '',
    `Error: ${error}`,
    '',
    `Site address: ${publicUrlOf(deps, p)}`,
    `Bucket: ${deps.publicUrl()}/mailboxes/${p.mailbox_id}`,
    '',
    'Fix the files, then publish again or retry the build (POST /api/v1/buckets/{id}/publication/retry).',
  ].join('\n');
  for (const o of owners) await sendSystemMail(deps, { to: o.email, subject: `Publishing "${name}" failed`, text }, { db: trx });
}
