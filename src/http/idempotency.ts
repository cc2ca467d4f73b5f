import type { Transaction } from 'kysely';
import type { DB } from '../db/schema.ts';
import type { RequestCtx } from '../context.ts';
import { AppError, invalidArgument } from '../errors.ts';
import { sha256Hex } from '../ids.ts';
import { iso } from '../time.ts';

const KEY_SHAPE = /^[a-zA-Z0-9_-]{8,80}$/;

/**
 * Runs a create at most once per (person, operation, Idempotency-Key). A replay with the
 * same request returns the resource made the first time; the same key with a different
 * request is IDEMPOTENCY_KEY_CONFLICT. The key is recorded in the create's transaction.
 */
export async function idempotentCreate<T>(
  ctx: RequestCtx,
  operation: string,
  key: string | undefined,
  request: unknown,
  create: (record: ((trx: Transaction<DB>, resourceId: string) => Promise<void>) | undefined) => Promise<T>,
  load: (resourceId: string) => Promise<T>,
): Promise<{ replayed: boolean; result: T }> {
  if (key === undefined) return { replayed: false, result: await create(undefined) };
  if (!KEY_SHAPE.test(key)) throw invalidArgument('Idempotency-Key', 'must be 8 to 80 letters, digits, underscores or hyphens');
  const scope = `${operation}:${ctx.credential.user.id}`;
  const requestHash = sha256Hex(JSON.stringify(request ?? null));
  const replay = async () => {
    const row = await ctx.db.selectFrom('idempotency_keys').selectAll().where('scope', '=', scope).where('key', '=', key).executeTakeFirst();
    if (!row) return undefined;
    if (row.request_hash !== requestHash) throw new AppError('IDEMPOTENCY_KEY_CONFLICT', undefined, { field: 'Idempotency-Key' });
    return { replayed: true, result: await load(row.resource_id) };
  };
  const earlier = await replay();
  if (earlier) return earlier;
  try {
    const result = await create(async (trx, resourceId) => {
      await trx.insertInto('idempotency_keys').values({ scope, key, request_hash: requestHash, resource_id: resourceId, created_at: iso(ctx.now()) }).execute();
    });
    return { replayed: false, result };
  } catch (err) {
    // A concurrent request with the same key may have won the race (we then fail on its
    // key, or on a rule its resource now breaks, such as a taken title): answer with its resource.
    const raced = await replay();
    if (raced) return raced;
    throw err;
  }
}
