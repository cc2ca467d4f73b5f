import { Command, Option } from 'commander';
import { ConfigError, loadConfig } from '../config.ts';
import { openDatabase, migrate } from '../db/database.ts';
import { registerUser, RegistrationError, setAccountStatus, setAccountSuspended } from '../accounts/accounts.service.ts';
import { createApiKey } from '../auth/keys.service.ts';
import { findUserByEmail } from '../users/users.service.ts';
import type { PlanName, Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { registerUserCommands } from './commands/index.ts';

function config() {
  try {
    return loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}

/** Runs an operator command against the configured database and prints one JSON object. */
async function withDatabase<T>(fn: (db: Awaited<ReturnType<typeof openDatabase>>['db']) => Promise<T>) {
  const cfg = config();
  const database = await openDatabase(cfg.databaseUrl, cfg.databaseSchema);
  try {
    await migrate(database);
    const out = await fn(database.db);
    process.stdout.write(`${JSON.stringify(out)}\n`);
  } catch (err) {
    const message = err instanceof RegistrationError ? `${err.field}: ${err.message}` : err instanceof AppError ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
    process.stdout.write(`${JSON.stringify({ error: message })}\n`);
    process.exitCode = 1;
  } finally {
    await database.close();
  }
}

const program = new Command('cubby').description('Cubby: private file buckets with their own email addresses');

program
  .command('serve')
  .description('Run the service (roles from CUBBY_ROLES)')
  .action(async () => {
    const cfg = config();
    // Loaded here, not at the top: the operator commands need only the database, and
    // loading every HTTP route made each of them take seconds to start.
    const { createApp } = await import('../app.ts');
    const app = createApp(cfg);
    const started = await app.start();
    const users = await started.deps.db.selectFrom('users').select('id').limit(1).execute();
    const base = started.urls.http;
    console.log(`Cubby is running.`);
    if (base) {
      console.log(`  Dashboard:   ${base}/`);
      console.log(`  API (R):     ${base}/v1   (OpenAPI: ${base}/v1/openapi.json)`);
      console.log(`  API (A):     ${base}/api/v1   (OpenAPI: ${base}/api/v1/openapi.json)`);
      if (users.length === 0) console.log(`  No users yet. Sign up: ${base}/users/sign_up`);
    }
    if (started.urls.smtp) console.log(`  SMTP:        ${started.urls.smtp}   (mail to any mailbox address @${cfg.mailDomain})`);
    if (started.urls.sites) console.log(`  Sites:       ${started.urls.sites.replace('//', '//<slug>.')}   (published websites, each on its own origin)`);
    console.log(`  Data:        ${cfg.dataDir}`);
    const shutdown = async () => {
      await app.stop();
      process.exit(0);
    };
    process.once('SIGINT', shutdown);
    process.once('SIGTERM', shutdown);
  });

const admin = program.command('admin').description('Operator commands for self-hosters (print one JSON object)');

admin
  .command('create-user')
  .requiredOption('--email <email>')
  .requiredOption('--password <password>')
  .requiredOption('--name <name>')
  .option('--account-name <name>')
  .addOption(new Option('--plan <plan>').choices(['free', 'paid', 'pilot', 'agency']).default('free'))
  .action((o) =>
    withDatabase(async (db) => {
      const { user, account } = await registerUser(db, { email: o.email, password: o.password, name: o.name, accountName: o.accountName, plan: o.plan as PlanName }, new Date());
      return { user: { id: user.id, email: user.email, name: user.name }, account: { id: account.id, name: account.name, kind: account.kind, plan: account.plan } };
    }),
  );

admin
  .command('create-key')
  .requiredOption('--email <email>')
  .option('--account <id>', 'account the key acts on by default (default: the person\'s first account)')
  .addOption(new Option('--scope <scope>').choices(['mailbox_read', 'mailbox_write', 'mailbox_admin']).default('mailbox_admin'))
  .option('--label <label>')
  .option('--expires-at <iso>')
  .action((o) =>
    withDatabase(async (db) => {
      const user = await findUserByEmail(db, o.email);
      if (!user) throw new Error(`no user with email ${o.email}`);
      const accountId =
        o.account ??
        (await db.selectFrom('memberships').select('account_id').where('user_id', '=', user.id).orderBy('id').executeTakeFirstOrThrow()).account_id;
      const key = await createApiKey(db, { userId: user.id, accountId, label: o.label ?? null, scope: o.scope as Scope, expiresAt: o.expiresAt ?? null }, { userId: user.id, apiKeyId: null, agent: null, requestId: null }, new Date());
      return { id: key.id, api_key: key.token, account_id: key.accountId, scope: key.scope, label: key.label, expires_at: key.expiresAt };
    }),
  );

admin
  .command('set-status')
  .requiredOption('--account <id>')
  .addOption(new Option('--status <status>').choices(['active', 'read_only']).makeOptionMandatory())
  .option('--reason <text>')
  .action((o) =>
    withDatabase(async (db) => {
      await setAccountStatus(db, o.account, o.status, o.reason ?? null, new Date());
      return { id: o.account, status: o.status };
    }),
  );

admin
  .command('suspend')
  .requiredOption('--account <id>')
  .option('--lift', 'lift the suspension')
  .action((o) =>
    withDatabase(async (db) => {
      await setAccountSuspended(db, o.account, !o.lift, new Date());
      return { id: o.account, suspended: !o.lift };
    }),
  );

admin
  .command('set-publishing')
  .description('Switch website publishing on or off for an account (off for new accounts)')
  .requiredOption('--account <id>')
  .addOption(new Option('--enabled <bool>').choices(['true', 'false']).makeOptionMandatory())
  .action((o) =>
    withDatabase(async (db) => {
      const { setWebsitePublishing } = await import('../sites/admin.ts');
      return setWebsitePublishing(db, o.account, o.enabled === 'true', new Date());
    }),
  );

admin
  .command('dkim-key')
  .description('Create or replace the DKIM signing key of a sending domain; prints the DNS TXT record to publish')
  .requiredOption('--domain <domain>')
  .option('--selector <selector>', 'DNS label of the key', 'cubby1')
  .action((o) =>
    withDatabase(async (db) => {
      const { createDkimKey } = await import('../outbound/dkim.ts');
      const { resolveSecretKey } = await import('../secret.ts');
      const record = await createDkimKey({ db, secret: resolveSecretKey(config()), now: () => new Date() }, o.domain, o.selector);
      return { domain: o.domain.toLowerCase(), selector: o.selector, dns_txt_name: record.name, dns_txt_value: record.value };
    }),
  );

registerUserCommands(program);

await program.parseAsync(process.argv);
