import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import { iso } from '../time.ts';

// The operator switch for website publishing (`cubby admin set-publishing`). New accounts start
// with it off; switching it off again also takes the account's sites offline (they stay published
// and come back when it is switched on).

export async function setWebsitePublishing(db: Kysely<DB>, accountId: string, enabled: boolean, now: Date): Promise<{ id: string; website_publishing_enabled: boolean }> {
  const res = await db
    .updateTable('accounts')
    .set({ website_publishing_enabled: enabled ? 1 : 0, updated_at: iso(now) })
    .where('id', '=', accountId)
    .executeTakeFirst();
  if (Number(res.numUpdatedRows) === 0) throw new Error(`no account with id ${accountId}`);
  return { id: accountId, website_publishing_enabled: enabled };
}
