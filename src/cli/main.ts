import { Command, Option } from 'commander';
import { ConfigError, loadConfig } from '../config.ts';
import { openConfiguredDatabase, migrate, type Database } from '../db/database.ts';
import { registerUser, RegistrationError, setAccountStatus, setAccountSuspended } from '../accounts/accounts.service.ts';
import { createApiKey } from '../auth/keys.service.ts';
import { findUserByEmail } from '../users/users.service.ts';
import type { PlanName, Scope } from '../db/schema.ts';
import { AppError } from '../errors.ts';
import { BackupError } from '../backup/manifest.ts';
import { SERVER_VERSION } from '../version.ts';
import { registerAccountAdminCommands } from './accounts-admin.ts';
import { missingDatabaseMessage } from './database-check.ts';
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

/** Prints one JSON object (the operator commands' only output on stdout). */
function print(out: unknown): void {
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

/** Prints `{"error": …}` and sets exit code 1: how every operator command fails. */
function fail(err: unknown): void {
  const message =
    err instanceof RegistrationError
      ? `${err.field}: ${err.message}`
      : err instanceof AppError || err instanceof BackupError
        ? `${err.code}: ${err.message}`
        : err instanceof Error
          ? err.message
          : String(err);
  print({ error: message });
  process.exitCode = 1;
}

/** False (after printing why, exit code 1) when the configured database is missing or empty. */
async function databaseExists(cfg: ReturnType<typeof config>): Promise<boolean> {
  const why = await missingDatabaseMessage(cfg);
  if (why) fail(new Error(why));
  return why === null;
}

/**
 * Runs an operator command against the server's database (the same CUBBY_* settings as `serve`)
 * and prints one JSON object. A missing or empty database is refused with exit 1, so a command run
 * with the wrong settings never creates a new data dir beside the real one; only `create-user`
 * (`initialise`) may create and migrate a database, so a first user can exist before the first start.
 */
async function withDatabase<T>(fn: (db: Database['db']) => Promise<T>, opts: { initialise?: boolean } = {}) {
  const cfg = config();
  if (!opts.initialise && !(await databaseExists(cfg))) return;
  const database = await openConfiguredDatabase(cfg);
  try {
    await migrate(database);
    print(await fn(database.db));
  } catch (err) {
    fail(err);
  } finally {
    await database.close();
  }
}

const program = new Command('cubby').description('Cubby: private file buckets with their own email addresses').version(SERVER_VERSION, '-V, --version', 'print the version');

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
    // SIGTERM/SIGINT: stop gracefully within CUBBY_SHUTDOWN_GRACE_S (see App.stop), exit 0. A
    // second signal, or a stop that overruns the grace by 5 s, exits at once with 1.
    let stopping = false;
    const shutdown = (signal: string) => {
      if (stopping) process.exit(1);
      stopping = true;
      started.deps.log.info({ signal, grace_s: cfg.shutdownGraceMs / 1000 }, 'shutting down');
      setTimeout(() => {
        started.deps.log.error({}, 'shutdown overran its grace period; exiting');
        process.exit(1);
      }, cfg.shutdownGraceMs + 5_000).unref();
      app.stop({ graceMs: cfg.shutdownGraceMs }).then(
        () => process.exit(0),
        (err) => {
          started.deps.log.error({ err }, 'shutdown failed');
          process.exit(1);
        },
      );
    };
    process.on('SIGINT', shutdown);
    process.on('SIGTERM', shutdown);
  });

const admin = program
  .command('admin')
  .description('Operator commands for self-hosters: each prints one JSON object; they read the same CUBBY_* settings as serve')
  .addHelpText('after', '\nA missing or empty database is refused (exit 1); only create-user may create it.');

admin
  .command('create-user')
  .description('Create a person with their own account (may create and migrate a new database: the first user can exist before the first start)')
  .requiredOption('--email <email>', 'sign-in email')
  .requiredOption('--password <password>', 'sign-in password')
  .requiredOption('--name <name>', "the person's name")
  .option('--account-name <name>', "the account's name (default: from the person's name)")
  .addOption(new Option('--plan <plan>', "the account's plan").choices(['free', 'paid', 'pilot', 'agency']).default('free'))
  .action((o) =>
    withDatabase(async (db) => {
      const { user, account } = await registerUser(db, { email: o.email, password: o.password, name: o.name, accountName: o.accountName, plan: o.plan as PlanName }, new Date());
      return { user: { id: user.id, email: user.email, name: user.name }, account: { id: account.id, name: account.name, kind: account.kind, plan: account.plan } };
    }, { initialise: true }),
  );

admin
  .command('create-key')
  .description('Create an API key for a person (printed once; only its hash is stored)')
  .requiredOption('--email <email>', "the person's sign-in email")
  .option('--account <id>', 'account the key acts on by default (default: the person\'s first account)')
  .addOption(new Option('--scope <scope>', 'what the key may do').choices(['mailbox_read', 'mailbox_write', 'mailbox_admin']).default('mailbox_admin'))
  .option('--label <label>', 'a name for the key')
  .option('--expires-at <iso>', 'expiry time (ISO 8601; default: never)')
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
  .description("Set an account's status: read_only keeps its data readable and refuses changes and new mail")
  .requiredOption('--account <id>', 'account id (acct_…)')
  .addOption(new Option('--status <status>', 'the new status').choices(['active', 'read_only']).makeOptionMandatory())
  .option('--reason <text>', 'shown to the account')
  .action((o) =>
    withDatabase(async (db) => {
      await setAccountStatus(db, o.account, o.status, o.reason ?? null, new Date());
      return { id: o.account, status: o.status };
    }),
  );

admin
  .command('suspend')
  .description('Suspend an account (changes, incoming mail and its published sites refused), or lift the suspension')
  .requiredOption('--account <id>', 'account id (acct_…)')
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
  .requiredOption('--account <id>', 'account id (acct_…)')
  .addOption(new Option('--enabled <bool>', 'on or off').choices(['true', 'false']).makeOptionMandatory())
  .action((o) =>
    withDatabase(async (db) => {
      const { setWebsitePublishing } = await import('../sites/admin.ts');
      return setWebsitePublishing(db, o.account, o.enabled === 'true', new Date());
    }),
  );

admin
  .command('dkim-key')
  .description('Create or replace the DKIM signing key of a sending domain; prints the DNS TXT record to publish')
  .requiredOption('--domain <domain>', 'the sending domain')
  .option('--selector <selector>', 'DNS label of the key', 'cubby1')
  .action((o) =>
    withDatabase(async (db) => {
      const { createDkimKey } = await import('../outbound/dkim.ts');
      const { resolveSecretKey } = await import('../secret.ts');
      const record = await createDkimKey({ db, secret: resolveSecretKey(config()), now: () => new Date() }, o.domain, o.selector);
      return { domain: o.domain.toLowerCase(), selector: o.selector, dns_txt_name: record.name, dns_txt_value: record.value };
    }),
  );

admin
  .command('list-accounts')
  .description('List every account with its plan, status and members')
  .action(() =>
    withDatabase(async (db) => {
      const { listAccounts } = await import('./listings.ts');
      return { accounts: await listAccounts(db) };
    }),
  );

admin
  .command('list-users')
  .description('List every person with their accounts and roles')
  .action(() =>
    withDatabase(async (db) => {
      const { listUsers } = await import('./listings.ts');
      return { users: await listUsers(db) };
    }),
  );

admin
  .command('backup')
  .description('Take a consistent backup of the running server: database snapshot, blobs, secret key and a manifest (see docs/operations.md)')
  .requiredOption('--out <dir>', 'a new or empty directory to write the backup into')
  .action(async (o) => {
    const { backup } = await import('../backup/backup.ts');
    await backup(config(), o.out, new Date()).then(print, fail);
  });

admin
  .command('restore')
  .description('Restore a backup into an empty data dir (and, on Postgres, an empty schema); then start the server on it')
  .requiredOption('--from <dir>', 'a directory written by admin backup')
  .action(async (o) => {
    const { restore } = await import('../backup/restore.ts');
    await restore(config(), o.from).then(print, fail);
  });
registerAccountAdminCommands(admin, config);

admin
  .command('reindex')
  .description('Rebuild the search index (emails now; file text extraction is queued for the server)')
  .option('--mailbox <id>', 'only this mailbox')
  .action(async (o) => {
    const cfg = config();
    if (!(await databaseExists(cfg))) return;
    const database = await openConfiguredDatabase(cfg);
    try {
      await migrate(database);
      const { reindex } = await import('../search/reindex.ts');
      const deps = { db: database.db, dialect: database.dialect, config: cfg, now: () => new Date() };
      process.stdout.write(`${JSON.stringify(await reindex(deps, { mailboxId: o.mailbox }, (line) => process.stderr.write(`${line}\n`)))}\n`);
    } finally {
      await database.close();
    }
  });
registerUserCommands(program);

await program.parseAsync(process.argv);
