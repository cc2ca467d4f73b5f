import { Option, type Command } from 'commander';
import type { Config } from '../config.ts';
import type { AppDeps } from '../context.ts';
import type { MembershipRole } from '../db/schema.ts';
import { openConfiguredDatabase, migrate } from '../db/database.ts';
import { createJobs } from '../jobs/jobs.ts';
import { resolveSecretKey } from '../secret.ts';
import { AppError } from '../errors.ts';
import { findUserByEmail } from '../users/users.service.ts';
import { missingDatabaseMessage } from './database-check.ts';

// Operator commands for people and roles: `cubby admin invite | set-role | reset-2fa`. Each prints
// one JSON object, like the other admin commands. Mail (the invitation) is queued in the database
// and delivered by the running service's worker. Services load on use, so the other commands stay quick.

const OPERATOR = { userId: null, apiKeyId: null, agent: null, requestId: null };

async function withDeps<T>(config: () => Config, fn: (deps: AppDeps) => Promise<T>): Promise<void> {
  const cfg = config();
  // Like every admin command: never create a database that the server does not use.
  const missing = await missingDatabaseMessage(cfg);
  if (missing) {
    process.stdout.write(`${JSON.stringify({ error: missing })}\n`);
    process.exitCode = 1;
    return;
  }
  const database = await openConfiguredDatabase(cfg);
  const now = () => new Date();
  try {
    await migrate(database);
    const deps = {
      db: database.db,
      dialect: database.dialect,
      config: cfg,
      secret: resolveSecretKey(cfg),
      now,
      jobs: createJobs(database.dialect, now, null),
      publicUrl: () => cfg.publicUrl ?? `http://${cfg.httpHost}:${cfg.httpPort}`,
    } as unknown as AppDeps;
    process.stdout.write(`${JSON.stringify(await fn(deps))}\n`);
  } catch (err) {
    const message = err instanceof AppError ? `${err.code}: ${err.message}` : err instanceof Error ? err.message : String(err);
    process.stdout.write(`${JSON.stringify({ error: message })}\n`);
    process.exitCode = 1;
  } finally {
    await database.close();
  }
}

async function userId(deps: AppDeps, email: string): Promise<string> {
  const user = await findUserByEmail(deps.db, email);
  if (!user) throw new Error(`no user with email ${email}`);
  return user.id;
}

export function registerAccountAdminCommands(admin: Command, config: () => Config): void {
  admin
    .command('invite')
    .description('Invite someone to an account by email (whatever CUBBY_SIGNUP says); prints the link too')
    .requiredOption('--account <id>')
    .requiredOption('--email <email>')
    .addOption(new Option('--role <role>').choices(['owner', 'administrator', 'collaborator']).default('collaborator'))
    .action((o) =>
      withDeps(config, async (deps) => {
        const { inviteMember } = await import('../accounts/members.service.ts');
        const { id, link } = await inviteMember(deps, OPERATOR, { accountId: o.account, email: o.email, role: o.role as MembershipRole });
        return { id, account_id: o.account, email: o.email.trim().toLowerCase(), role: o.role, link };
      }),
    );

  admin
    .command('set-role')
    .description("Change a member's role, or remove them with --role none (AI connections end below administrator)")
    .requiredOption('--account <id>')
    .requiredOption('--email <email>')
    .addOption(new Option('--role <role>').choices(['owner', 'administrator', 'collaborator', 'none']).makeOptionMandatory())
    .action((o) =>
      withDeps(config, async (deps) => {
        const { changeMember } = await import('../accounts/members.service.ts');
        const role = o.role === 'none' ? null : (o.role as MembershipRole);
        const res = await changeMember(deps, OPERATOR, { accountId: o.account, userId: await userId(deps, o.email), role });
        return { account_id: o.account, email: o.email.trim().toLowerCase(), role, revoked_connections: res.revokedConnections, revoked_keys: res.revokedKeys };
      }),
    );

  admin
    .command('reset-2fa')
    .description('Turn two-factor sign-in off for a person who lost their authenticator and recovery codes')
    .requiredOption('--email <email>')
    .action((o) =>
      withDeps(config, async (deps) => {
        const { disableTotp } = await import('../accounts/security.service.ts');
        const id = await userId(deps, o.email);
        const changed = await disableTotp(deps.db, id, deps.now());
        return { user_id: id, email: o.email.trim().toLowerCase(), two_factor_enabled: false, changed };
      }),
    );
}
