import os from 'node:os';
import { spawn } from 'node:child_process';
import type { Command } from 'commander';
import { Cubby } from '../../../packages/sdk/src/node.ts';
import { action } from './context.ts';
import { readConfig, writeConfig } from './config-file.ts';
import { CliError, EXIT, usage } from './output.ts';

// Sign-in with the OAuth device flow (RFC 8628): the CLI registers itself as a public client,
// shows a code and a URL, the person approves in a browser (choosing account, scope and
// mailboxes), and the token answer carries an API key for the REST API, which is what the CLI
// keeps. `logout` revokes that key through the same client and forgets it.

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

async function postJson(url: string, body: Record<string, unknown>): Promise<{ status: number; json: any }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) });
  const text = await res.text();
  let json: any = {};
  try {
    json = JSON.parse(text);
  } catch {
    json = { error: 'invalid_response', error_description: text.slice(0, 200) };
  }
  return { status: res.status, json };
}

function openBrowser(url: string): void {
  const cmd = process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'cmd' : 'xdg-open';
  const args = process.platform === 'win32' ? ['/c', 'start', '', url] : [url];
  try {
    const child = spawn(cmd, args, { stdio: 'ignore', detached: true });
    child.on('error', () => undefined);
    child.unref();
  } catch {
    // no browser: the URL is printed anyway
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export function registerAuth(program: Command): void {
  program
    .command('login')
    .description('Sign in with your browser (OAuth device flow) and save the key under a profile')
    .option('--no-browser', 'do not try to open a browser; just print the URL')
    .option('--with-api-key <key>', 'save an existing API key instead of signing in')
    .addHelpText('after', '\nExamples:\n  cubby login --url https://cubby.example.com\n  cubby login --profile work --url https://cubby.example.com\n  cubby login --with-api-key cbk_… --url http://127.0.0.1:8080')
    .action(
      action(async (ctx, o: { browser: boolean; withApiKey?: string }) => {
        // --url (a common option): where Cubby runs; default the profile's, CUBBY_URL, or a local server.
        const url = (ctx.opts.url ?? process.env.CUBBY_URL ?? ctx.profile?.url ?? 'http://127.0.0.1:8080').replace(/\/+$/, '');
        let apiKey: string;
        let clientId: string | null = null;
        if (o.withApiKey) {
          apiKey = o.withApiKey;
        } else {
          const metaRes = await fetch(`${url}/.well-known/oauth-authorization-server`).catch((err) => {
            throw new CliError(`Cannot reach ${url}: ${(err as Error).message}`, EXIT.temporary, 'NETWORK_ERROR');
          });
          if (!metaRes.ok) throw new CliError(`${url} does not look like Cubby (no OAuth metadata, HTTP ${metaRes.status})`, EXIT.error, 'NOT_CUBBY');
          const meta = (await metaRes.json()) as { registration_endpoint: string; device_authorization_endpoint: string; token_endpoint: string };
          const reg = await postJson(meta.registration_endpoint, {
            client_name: `Cubby CLI on ${os.hostname()}`,
            redirect_uris: [],
            grant_types: [DEVICE_GRANT, 'refresh_token'],
            response_types: [],
            token_endpoint_auth_method: 'none',
          });
          if (reg.status >= 300) throw new CliError(`Registering the CLI failed: ${reg.json.error_description ?? reg.json.error}`, reg.status === 429 ? EXIT.temporary : EXIT.error, 'OAUTH_REGISTRATION_FAILED');
          clientId = reg.json.client_id as string;
          const da = await postJson(meta.device_authorization_endpoint, { client_id: clientId, scope: 'cubby:mcp' });
          if (da.status >= 300) throw new CliError(`Starting the sign-in failed: ${da.json.error_description ?? da.json.error}`, da.status === 429 ? EXIT.temporary : EXIT.error, 'OAUTH_DEVICE_FAILED');
          const { device_code, user_code, verification_uri, verification_uri_complete, expires_in } = da.json as Record<string, string>;
          let interval = Number(da.json.interval ?? 5);
          if (ctx.out.json) process.stdout.write(`${JSON.stringify({ verification_uri, verification_uri_complete, user_code, expires_in })}\n`);
          else {
            process.stderr.write(`To sign in, open ${verification_uri_complete ?? verification_uri}\n`);
            process.stderr.write(`and check that it shows the code ${ctx.out.paint('bold', user_code!)}. Waiting for approval…\n`);
          }
          if (o.browser && process.stdout.isTTY && (process.platform !== 'linux' || process.env.DISPLAY || process.env.WAYLAND_DISPLAY)) openBrowser(verification_uri_complete ?? verification_uri!);
          const deadline = Date.now() + Number(expires_in ?? 600) * 1000;
          for (;;) {
            if (Date.now() > deadline) throw new CliError('The sign-in code expired; run `cubby login` again.', EXIT.error, 'OAUTH_EXPIRED');
            await sleep(interval * 1000);
            const tok = await postJson(meta.token_endpoint, { grant_type: DEVICE_GRANT, device_code, client_id: clientId });
            if (tok.status === 200) {
              apiKey = tok.json.cubby_api_key ?? tok.json.access_token;
              break;
            }
            if (tok.json.error === 'authorization_pending') continue;
            if (tok.json.error === 'slow_down') {
              interval += 5;
              continue;
            }
            if (tok.json.error === 'access_denied') throw new CliError('The sign-in was denied in the browser.', EXIT.permission, 'OAUTH_DENIED');
            throw new CliError(`Sign-in failed: ${tok.json.error_description ?? tok.json.error}`, EXIT.error, 'OAUTH_FAILED');
          }
        }
        const cubby = new Cubby({ baseUrl: url, apiKey: apiKey! });
        const status = await cubby.status();
        const config = readConfig();
        const name = ctx.profileName;
        config.profiles[name] = { url, api_key: apiKey!, account_id: ctx.opts.account ?? null, client_id: clientId, user_email: status.user?.email ?? null, created_at: new Date().toISOString() };
        if (!config.profiles[config.default_profile]) config.default_profile = name;
        const file = writeConfig(config);
        // With --json, login is a stream of two JSON lines: the prompt (device flow) and this result.
        const done = { profile: name, url, account_id: status.account.id, account_name: status.account.name, user: status.user, config: file };
        ctx.out.item(done, `Signed in to ${url} as ${status.user?.email ?? 'an API key'} (account ${status.account.name}, ${status.account.id}); saved as profile "${name}".`);
      }),
    );

  program
    .command('logout')
    .description('Revoke the saved key (when it came from `cubby login`) and forget the profile')
    .addHelpText('after', '\nExamples:\n  cubby logout\n  cubby logout --profile work')
    .action(
      action(async (ctx) => {
        const config = readConfig();
        const profile = config.profiles[ctx.profileName];
        if (!profile) throw new CliError(`No profile "${ctx.profileName}" to log out of.`, EXIT.notFound, 'PROFILE_NOT_FOUND');
        let revoked = false;
        if (profile.client_id) {
          const res = await fetch(`${profile.url}/oauth/revoke`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token: profile.api_key, client_id: profile.client_id }) }).catch(() => null);
          revoked = Boolean(res?.ok);
          if (!revoked) ctx.out.note('Could not revoke the key on the server (it is forgotten here; revoke it in the dashboard).');
        } else ctx.out.note('This key was not made by `cubby login`; revoke it in the dashboard if it should stop working.');
        delete config.profiles[ctx.profileName];
        if (config.default_profile === ctx.profileName) config.default_profile = Object.keys(config.profiles)[0] ?? 'default';
        writeConfig(config);
        ctx.out.result({ profile: ctx.profileName, revoked }, () => process.stdout.write(`Logged out of profile "${ctx.profileName}"${revoked ? ' (key revoked)' : ''}.\n`));
      }),
    );

  program
    .command('status')
    .description('Who and where: server, account, person, key')
    .addHelpText('after', '\nExamples:\n  cubby status\n  cubby status --json | jq .account.id')
    .action(
      action(async (ctx) => {
        const status = await ctx.cubby().status();
        ctx.out.result({ profile: ctx.profile ? ctx.profileName : null, url: ctx.baseUrl(), ...status }, () => {
          const conn = status.connection as { scope?: string; mailbox_access?: string } | undefined;
          process.stdout.write(
            [
              `Server:   ${ctx.baseUrl()} (Cubby ${status.server_version})`,
              `Account:  ${status.account.name} (${status.account.id})`,
              `User:     ${status.user ? `${status.user.name} <${status.user.email}>` : '—'}`,
              `Access:   ${conn?.scope ?? '?'}${conn?.mailbox_access ? `, ${conn.mailbox_access} mailboxes` : ''}`,
              `Profile:  ${ctx.profile ? ctx.profileName : '(from flags or environment)'}`,
            ].join('\n') + '\n',
          );
        });
      }),
    );

  program
    .command('profiles')
    .description('List saved profiles')
    .action(
      action(async (ctx) => {
        const config = readConfig();
        const rows = Object.entries(config.profiles).map(([name, p]) => ({ name, default: name === config.default_profile ? '*' : '', url: p.url, user: p.user_email ?? '', account: p.account_id ?? '' }));
        if (!rows.length && !ctx.out.json) throw usage('No profiles yet: run `cubby login`.');
        ctx.out.table(rows, ['default', 'name', 'url', 'user', 'account']);
      }),
    );
}
