import type { Kysely } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { PublicationKind, PublicationsTable } from './sites.schema.ts';

export function findPublication(db: Kysely<DB>, mailboxId: string, kind: PublicationKind): Promise<PublicationsTable | undefined> {
  return db.selectFrom('publications').selectAll().where('mailbox_id', '=', mailboxId).where('kind', '=', kind).executeTakeFirst();
}

export function publicationById(db: Kysely<DB>, id: string): Promise<PublicationsTable | undefined> {
  return db.selectFrom('publications').selectAll().where('id', '=', id).executeTakeFirst();
}

/** Main sites that are up or on their way up in a billing group, other than `exceptMailboxId`'s. */
export async function countLiveSites(db: Kysely<DB>, groupId: string, exceptMailboxId: string): Promise<number> {
  const row = await db
    .selectFrom('publications')
    .innerJoin('accounts', 'accounts.id', 'publications.account_id')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('publications.kind', '=', 'main')
    .where('publications.status', 'in', ['publishing', 'published'])
    .where('publications.mailbox_id', '!=', exceptMailboxId)
    .where((eb) => eb.or([eb('accounts.id', '=', groupId), eb('accounts.parent_account_id', '=', groupId)]))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/** Removes a bundle's manifest; its blobs become collectable once nothing else refers to them. */
export async function dropBundle(db: Kysely<DB>, bundleId: string): Promise<void> {
  await db.deleteFrom('site_files').where('bundle_id', '=', bundleId).execute();
  await db.deleteFrom('site_bundle_blobs').where('bundle_id', '=', bundleId).execute();
  await db.deleteFrom('site_bundles').where('id', '=', bundleId).execute();
}

/** Is the publication serving right now (what the sites server would answer with)? */
export function isLive(p: PublicationsTable, now: Date): boolean {
  return p.bundle_id !== null && p.status === 'published' && (p.expires_at === null || Date.parse(p.expires_at) > now.getTime());
}
