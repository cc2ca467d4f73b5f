// `npm run bench:conversations`: the conversation lookup each received message with a Message-ID
// makes inside the group commit (src/inbound/conversations.ts), against one mailbox holding EMAILS
// emails, for a message that starts a conversation (nothing matches) and for a reply (its parent
// is in the middle of the mailbox). Also the earlier form of the query (one WHERE with OR, ordered
// by seq), which SQLite without table statistics served by reading the mailbox in order. As the
// server runs: no ANALYZE (SQLite has no statistics unless it runs; set ANALYZE=1 to see the plans
// with them), inside a transaction. Prints one JSON line: µs per lookup, median and p99 of LOOKUPS.
// Env: EMAILS (100000), LOOKUPS (200), ANALYZE (0), BENCH_DATABASE_URL (postgres://…, fresh schema).
import { randomBytes } from 'node:crypto';
import { sql, type Kysely } from 'kysely';
import { loadConfig } from '../src/config.ts';
import { createApp } from '../src/app.ts';
import { registerUser } from '../src/accounts/accounts.service.ts';
import type { DB, EmailsTable } from '../src/db/schema.ts';
import { ConversationIndex } from '../src/inbound/conversations.ts';
import { emailRow } from '../test/search-seed.ts';
import { createApiKey } from '../src/auth/keys.service.ts';
import { authenticateApiKey } from '../src/auth/credential.ts';
import { createMailbox } from '../src/mailboxes/mailboxes.service.ts';
import type { RequestCtx } from '../src/context.ts';
import { gitCommit, log, makeRunDir, round } from './lib.ts';
import { benchDatabase } from './database.ts';
import { percentile } from './smtp-client.ts';

const EMAILS = Number(process.env.EMAILS ?? 100_000);
const LOOKUPS = Number(process.env.LOOKUPS ?? 200);

/** The lookup as it was before (one WHERE with OR), for the comparison. */
async function earlierLookup(trx: Kysely<DB>, mailboxId: string, threadKey: string | null, refs: string[]): Promise<string | null> {
  const row = await trx
    .selectFrom('emails')
    .select('conversation_id')
    .where('mailbox_id', '=', mailboxId)
    .where((eb) => {
      const ors = [];
      if (refs.length) ors.push(eb('message_id', 'in', refs.slice(0, 200)));
      if (threadKey) ors.push(eb('thread_key', '=', threadKey), eb('message_id', '=', threadKey));
      return eb.or(ors);
    })
    .orderBy('seq', 'asc')
    .limit(1)
    .executeTakeFirst();
  return row?.conversation_id ?? null;
}

async function main() {
  // SQLite in the run dir, or Postgres in a fresh schema with BENCH_DATABASE_URL (dropped at the end).
  const database = benchDatabase('conv');
  const env: Record<string, string> = {
    CUBBY_DATA_DIR: makeRunDir('conversations'),
    CUBBY_ROLES: 'api',
    CUBBY_HTTP_PORT: '0',
    CUBBY_LOG_LEVEL: 'silent',
    CUBBY_SECRET_KEY: randomBytes(32).toString('hex'),
    ...database.env,
  };
  const app = createApp(loadConfig(env));
  const { deps } = await app.start();
  try {
    const { user, account } = await registerUser(deps.db, { email: 'bench@example.com', password: 'a long bench password', name: 'Bench' }, new Date());
    const actor = { userId: user.id, apiKeyId: null, agent: null, requestId: null };
    const key = await createApiKey(deps.db, { userId: user.id, accountId: account.id, scope: 'mailbox_admin' }, actor, new Date());
    const credential = await authenticateApiKey(deps.db, key.token, { agent: null, client: null } as any, new Date());
    const ctx: RequestCtx = { ...deps, credential, actor };
    const mailboxId = (await createMailbox(ctx, { title: 'Bench', field: 'mailbox' })).mailbox.id;
    const at = new Date().toISOString();
    log(`seeding ${EMAILS} emails in one mailbox`);
    for (let i = 0; i < EMAILS; i += 1000) {
      const rows: EmailsTable[] = [];
      for (let seq = i + 1; seq <= Math.min(EMAILS, i + 1000); seq++) {
        const row = emailRow({ mailboxId, accountId: account.id, seq, subject: 's', body: 'b', from: { address: 'a@example.com', name: null }, to: 'b@example.com', receivedAt: at });
        rows.push({ ...row, thread_key: row.message_id });
      }
      await deps.db.transaction().execute(async (trx) => {
        for (let k = 0; k < rows.length; k += 200) await trx.insertInto('emails').values(rows.slice(k, k + 200)).execute();
      });
    }
    if (process.env.ANALYZE === '1') await sql`analyze`.execute(deps.db);

    const parent = `<${mailboxId}.${Math.ceil(EMAILS / 2)}@seed>`;
    const cases = {
      new_conversation: () => ({ threadKey: `<new-${randomBytes(6).toString('hex')}@example.com>`, refs: [] as string[] }),
      reply: () => ({ threadKey: parent, refs: [parent] }),
    };
    const figures: Record<string, { p50_us: number; p99_us: number }> = {};
    for (const [name, input] of Object.entries(cases)) {
      for (const [form, find] of [
        ['now', (trx: Kysely<DB>, k: string | null, r: string[]) => new ConversationIndex(trx).find(mailboxId, k, r)],
        ['earlier', (trx: Kysely<DB>, k: string | null, r: string[]) => earlierLookup(trx, mailboxId, k, r)],
      ] as const) {
        const times: number[] = [];
        await deps.db.transaction().execute(async (trx) => {
          for (let i = 0; i < LOOKUPS; i++) {
            const { threadKey, refs } = input();
            const t = performance.now();
            const found = await find(trx, threadKey, refs);
            times.push((performance.now() - t) * 1000);
            if (name === 'reply' && found !== `c${Math.ceil(EMAILS / 2)}`) throw new Error(`${form}: the reply found ${found}`);
            if (name === 'new_conversation' && found !== null) throw new Error(`${form}: a new conversation found ${found}`);
          }
        });
        figures[`${name}_${form}`] = { p50_us: round(percentile(times, 50)!), p99_us: round(percentile(times, 99)!) };
        log(`${name} (${form}): p50 ${figures[`${name}_${form}`]!.p50_us} µs`);
      }
    }
    console.log(JSON.stringify({ bench: 'conversations', commit: gitCommit(), database: deps.dialect, emails: EMAILS, lookups: LOOKUPS, analyzed: process.env.ANALYZE === '1', ...figures }));
  } finally {
    await app.stop();
    await database.drop();
  }
}

await main();
