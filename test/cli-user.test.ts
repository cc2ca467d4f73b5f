import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp, type TestUser } from './harness.ts';
import { labelNow, sendMail } from './smtp-helpers.ts';
import { enablePublishing, siteFetch } from './sites-helpers.ts';
import { cli, cliEnv, finished, ROOT, startCli, tempDir, waitForOutput } from './cli-user-helpers.ts';

// The `cubby` user commands end to end: the real CLI as a child process (no terminal), the real
// app on port 0 (SQLite), every command at least once, exit codes and --json.

let app: TestApp;
let user: TestUser;
let env: Record<string, string>;
let work: string;

beforeAll(async () => {
  app = await startTestApp('sqlite');
  user = await app.user({ plan: 'paid' });
  await enablePublishing(app, user.accountId);
  work = tempDir();
  env = cliEnv({ CUBBY_URL: app.base, CUBBY_API_KEY: user.key, CUBBY_CONFIG_DIR: path.join(work, 'config') });
});
afterAll(async () => {
  await app?.stop();
  if (work) fs.rmSync(work, { recursive: true, force: true });
});

const write = (rel: string, content: string | Buffer) => {
  const p = path.join(work, rel);
  fs.mkdirSync(path.dirname(p), { recursive: true });
  fs.writeFileSync(p, content);
  return p;
};

async function newBox(title: string) {
  const r = await cli(['mailboxes', 'create', title, '--json'], env);
  expect(r.code, r.stderr).toBe(0);
  return r.json as { id: string; title: string; email: { address: string } };
}

// Each command is a fresh Node process (a second or more on a busy machine): generous timeouts.
// The tests run concurrently (each has its own mailbox, local folder and watch cursor; none
// depends on another's state): most of each one's time is a child process starting, so one
// test's CLI starts while another's waits on the server.
describe('cubby (user commands)', { timeout: 300_000, concurrent: true }, () => {
  it('conventions: --version, help with examples, usage errors (2), no credential (4), no colour off a terminal, completion', async () => {
    const version = await cli(['--version'], env);
    expect(version.code).toBe(0);
    expect(version.stdout.trim()).toMatch(/^\d+\.\d+\.\d+/);
    const help = await cli(['help', 'sync'], env);
    expect(help.code).toBe(0);
    expect(help.stdout).toContain('Examples:');
    expect(help.stdout).toContain('cubby sync ./site Website:');
    expect((await cli(['no-such-command'], env)).code).toBe(2);
    expect((await cli(['cp', 'only-one-arg'], env)).code).toBe(2);

    const anonymous = await cli(['status'], cliEnv({ CUBBY_CONFIG_DIR: path.join(work, 'empty-config') }));
    expect(anonymous.code).toBe(4);
    expect(anonymous.stderr).toContain('cubby login');
    const revoked = await cli(['status'], { ...env, CUBBY_API_KEY: 'cbk_revoked_or_made_up' });
    expect(revoked.code).toBe(4);
    expect(revoked.stderr).toMatch(/cubby login/);
    expect(revoked.stderr).toMatch(/request id \S+/);
    const jsonErr = await cli(['mailboxes', 'show', 'No Such Box', '--json'], env);
    expect(jsonErr.code).toBe(3);
    expect(JSON.parse(jsonErr.stderr).error).toMatchObject({ code: 'MAILBOX_NOT_FOUND', exit_code: 3 });

    const status = await cli(['status'], { ...env, FORCE_COLOR: '1' });
    expect(status.code, status.stderr).toBe(0);
    expect(status.stdout).toContain(user.accountId);
    expect(status.stdout).not.toMatch(/\x1b\[/);
    expect((await cli(['status', '--json'], env)).json).toMatchObject({ account: { id: user.accountId }, user: { email: user.email } });

    // nested help with examples; an unknown command to help is a usage error
    const nested = await cli(['help', 'mail', 'send'], env);
    expect(nested.code).toBe(0);
    expect(nested.stdout).toContain('Usage: cubby mail send');
    expect(nested.stdout).toContain('Examples:');
    expect((await cli(['help', 'mail', 'nope'], env)).code).toBe(2);
    // the server cannot be reached: temporary (75), with the code
    const down = await cli(['status'], { ...env, CUBBY_URL: 'http://127.0.0.1:9' });
    expect(down.code).toBe(75);
    expect(down.stderr).toContain('NETWORK_ERROR');

    for (const shell of ['bash', 'zsh', 'fish']) {
      const c = await cli(['completion', shell], env);
      expect(c.code).toBe(0);
      expect(c.stdout).toContain('sync');
      expect(c.stdout).toContain('mailboxes');
    }
    expect((await cli(['completion', 'tcsh'], env)).code).toBe(2);
  });

  it('on a terminal (a pty through script(1)): colours and a progress bar; never with NO_COLOR or --no-color; --quiet prints no progress', async () => {
    await newBox('CLI Tty');
    const dir = path.join(work, 'tty');
    for (let i = 0; i < 30; i++) write(`tty/f${i}.txt`, `tty ${i}\n`);
    const onTty = (args: string[], extra: Record<string, string> = {}) =>
      cli(['-qec', [process.execPath, path.join(ROOT, 'bin/cubby.js'), ...args].map((a) => `'${a}'`).join(' '), '/dev/null'], { ...env, TERM: 'xterm-256color', ...extra }, { bin: 'script' });
    const coloured = await onTty(['mailboxes', 'ls']);
    expect(coloured.code, coloured.stdout).toBe(0);
    expect(coloured.stdout).toMatch(/\x1b\[1mID\s+TITLE/);
    expect((await onTty(['mailboxes', 'ls'], { NO_COLOR: '1' })).stdout).not.toMatch(/\x1b\[/);
    expect((await onTty(['mailboxes', 'ls', '--no-color'])).stdout).not.toMatch(/\x1b\[1m/);
    const bar = await onTty(['sync', dir, 'CLI Tty:']);
    expect(bar.code, bar.stdout).toBe(0);
    expect(bar.stdout).toMatch(/30\/30 files \| .* \| ETA/);
    const quiet = await cli(['sync', dir, 'CLI Tty:', '--quiet'], env);
    expect(quiet.code).toBe(0);
    expect(quiet.stderr).toBe('');
    expect(quiet.stdout).toMatch(/0 uploaded, 30 unchanged/);
  });

  it('mailboxes: create, ls, show, rename, archive, unarchive, delete (--yes), unknown names are 3', async () => {
    const box = await newBox('CLI Box');
    const ls = await cli(['mailboxes', 'ls', '--json'], env);
    expect(ls.json.map((m: { id: string }) => m.id)).toContain(box.id);
    const table = await cli(['mailboxes', 'ls'], env);
    expect(table.stdout).toMatch(/ID\s+TITLE\s+ADDRESS/);
    expect(table.stdout).toContain('CLI Box');
    // by title, by address, by id
    for (const ref of ['CLI Box', box.email.address, box.id]) expect((await cli(['mailboxes', 'show', ref, '--json'], env)).json.id).toBe(box.id);
    expect((await cli(['mailboxes', 'rename', 'CLI Box', 'CLI Box 2'], env)).stdout).toContain('CLI Box 2');
    expect((await cli(['mailboxes', 'delete', 'CLI Box 2', '--yes'], env)).code).toBe(5); // not archived
    expect((await cli(['mailboxes', 'archive', 'CLI Box 2'], env)).code).toBe(0);
    expect((await cli(['mailboxes', 'unarchive', 'CLI Box 2'], env)).code).toBe(0);
    await cli(['mailboxes', 'archive', box.id], env);
    const noTty = await cli(['mailboxes', 'delete', box.id], env);
    expect(noTty.code).toBe(2); // would have to ask, and there is no terminal
    const del = await cli(['mailboxes', 'delete', box.id, '--yes', '--json'], env);
    expect(del.code, del.stderr).toBe(0);
    expect(del.json).toMatchObject({ deleted: true, id: box.id });
    expect((await cli(['mailboxes', 'show', box.id], env)).code).toBe(3);
  });

  it('files: cp up and down (files and folders), ls, cat, append, versions, restore, mv, rm; .. is refused', async () => {
    await newBox('CLI Files');
    const note = write('up/note.txt', 'first\n');
    write('up/folder/a.txt', 'A');
    write('up/folder/sub/b.txt', 'B');
    expect((await cli(['cp', note, 'CLI Files:docs/'], env)).stdout).toContain('docs/note.txt');
    const folder = await cli(['cp', path.join(work, 'up/folder'), 'CLI Files:tree', '--json'], env);
    expect(folder.code, folder.stderr).toBe(0);
    expect(folder.json).toMatchObject({ uploaded: 2, skipped: 0 });

    const ls = await cli(['ls', 'CLI Files:', '--json'], env);
    expect(ls.stdout.trim().split('\n').map((l) => JSON.parse(l).path).sort()).toEqual(['docs/note.txt', 'tree/a.txt', 'tree/sub/b.txt']);
    expect((await cli(['ls', 'CLI Files:tree/'], env)).stdout).not.toContain('note.txt');
    expect((await cli(['cat', 'CLI Files:docs/note.txt'], env)).stdout).toBe('first\n');
    expect((await cli(['append', 'CLI Files:docs/note.txt', 'second'], env)).code).toBe(0);
    expect((await cli(['append', 'CLI Files:docs/note.txt', '--newline'], env, { input: 'third' })).code).toBe(0);
    expect((await cli(['cat', 'CLI Files:docs/note.txt'], env)).stdout).toBe('first\nsecond\nthird');
    const versions = await cli(['versions', 'CLI Files:docs/note.txt', '--json'], env);
    expect(versions.json.map((v: { version_number: number }) => v.version_number)).toEqual([3, 2, 1]);
    expect((await cli(['restore', 'CLI Files:docs/note.txt', '1'], env)).stdout).toContain('now version 4');
    expect((await cli(['cat', 'CLI Files:docs/note.txt'], env)).stdout).toBe('first\n');
    expect((await cli(['restore', 'CLI Files:docs/note.txt', '99'], env)).code).toBe(3);

    expect((await cli(['mv', 'CLI Files:docs/note.txt', 'notes/renamed.txt'], env)).code).toBe(0);
    const down = path.join(work, 'down');
    const one = await cli(['cp', 'CLI Files:notes/renamed.txt', `${down}/`], env);
    expect(one.code, one.stderr).toBe(0);
    expect(fs.readFileSync(path.join(down, 'renamed.txt'), 'utf8')).toBe('first\n');
    expect((await cli(['cp', 'CLI Files:tree', path.join(down, 'tree')], env)).code).toBe(0);
    expect(fs.readFileSync(path.join(down, 'tree/sub/b.txt'), 'utf8')).toBe('B');
    expect((await cli(['cp', 'CLI Files:notes/renamed.txt', '-'], env)).stdout).toBe('first\n');

    expect((await cli(['cat', 'CLI Files:../etc/passwd'], env)).code).toBe(2);
    expect((await cli(['cat', 'CLI Files:missing.txt'], env)).code).toBe(3);
    expect((await cli(['ls', 'Nope:'], env)).code).toBe(3);
    expect((await cli(['rm', 'CLI Files:notes/renamed.txt'], env)).code).toBe(0);
    expect((await cli(['rm', '-r', 'CLI Files:tree'], env)).stdout).toContain('Removed tree/sub/b.txt');
    expect((await cli(['ls', 'CLI Files:', '--json'], env)).stdout.trim()).toBe('');
  });

  it('sync: batches through one session, skips identical files, re-uploads changed ones, --delete prunes, plain progress lines', async () => {
    const box = await newBox('CLI Sync');
    const dir = path.join(work, 'sync');
    for (let i = 0; i < 120; i++) write(`sync/d${i % 5}/f${i}.txt`, `file ${i}\n`);
    const first = await cli(['sync', dir, 'CLI Sync:', '--batch-size', '25', '--json'], env);
    expect(first.code, first.stderr).toBe(0);
    expect(first.json).toMatchObject({ uploaded: 120, skipped: 0, session: { status: 'finalized' } });
    const again = await cli(['sync', dir, 'CLI Sync:'], env);
    expect(again.code).toBe(0);
    expect(again.stdout).toMatch(/0 uploaded, 120 unchanged/);
    expect(again.stderr).toMatch(/done: 120\/120 files/); // not a terminal: plain lines, no bar

    write('sync/d0/f0.txt', 'changed\n');
    fs.rmSync(path.join(dir, 'd1/f1.txt'));
    const third = await cli(['sync', dir, 'CLI Sync:', '--delete', '--json'], env);
    expect(third.json).toMatchObject({ uploaded: 1, skipped: 118 });
    expect((await cli(['cat', 'CLI Sync:d0/f0.txt'], env)).stdout).toBe('changed\n');
    expect((await cli(['cat', 'CLI Sync:d1/f1.txt'], env)).code).toBe(3);
    expect((await cli(['sync', dir, 'CLI Sync:prefix', '--delete'], env)).code).toBe(2);
    expect((await cli(['sync', path.join(work, 'nowhere'), 'CLI Sync:'], env)).code).toBe(3);
    const mailbox = (await app.request('GET', `/v1/mailboxes/${box.id}`, { key: user.key })).body.data.mailbox;
    expect(mailbox.files_count).toBe(119);
  });

  it('sync: Ctrl-C cancels the session (no lock left) and the same command resumes', async () => {
    const box = await newBox('CLI Resume');
    // Enough that the interrupt (after 40, one file at a time in batches of 10) lands far from the end.
    const FILES = 300;
    const dir = path.join(work, 'resume');
    for (let i = 0; i < FILES; i++) write(`resume/f${i}.txt`, `resume ${i}\n`);
    const child = startCli(['sync', dir, 'CLI Resume:', '--batch-size', '10', '--concurrency', '1'], env);
    const done = finished(child);
    // after a few batches have been saved (finalize_batch runs after each batch of 10)
    await waitForOutput(child, (t) => [...t.matchAll(/uploading: (\d+)\//g)].some((m) => Number(m[1]) >= 40), 'stderr');
    child.kill('SIGINT');
    const interrupted = await done;
    expect(interrupted.code).toBe(130);
    expect(interrupted.stderr).toContain('run the same command to resume');
    const mailbox = (await app.request('GET', `/v1/mailboxes/${box.id}`, { key: user.key })).body.data.mailbox;
    expect(mailbox.lock?.locked ?? false).toBe(false);
    const savedBefore = mailbox.files_count as number;
    expect(savedBefore).toBeGreaterThan(0);
    expect(savedBefore).toBeLessThan(FILES);

    const resumed = await cli(['sync', dir, 'CLI Resume:', '--json'], env);
    expect(resumed.code, resumed.stderr).toBe(0);
    expect(resumed.json.skipped).toBe(savedBefore);
    expect(resumed.json.uploaded).toBe(FILES - savedBefore);
  });

  it('mail: ls with filters, show (untrusted text), get (.eml and attachments), read/unread, send with an attachment, reply', async () => {
    const box = await newBox('CLI Mail');
    const first = (await sendMail(app, { to: box.email.address, from: 'alice@example.com', subject: 'Invoice 1', text: 'Please pay.', attachments: [{ filename: 'invoice.txt', content: 'total 10' }] })).emailIds[0]!;
    await sendMail(app, { to: box.email.address, from: 'bob@example.com', subject: 'Lunch?', text: 'Noon' });
    await labelNow(app);

    const ls = await cli(['mail', 'ls', 'CLI Mail', '--json'], env);
    expect(ls.json.map((e: { subject: string }) => e.subject)).toEqual(['Lunch?', 'Invoice 1']);
    expect((await cli(['mail', 'ls', 'CLI Mail', '--from', 'alice@example.com', '--json'], env)).json.map((e: { id: string }) => e.id)).toEqual([first]);
    expect((await cli(['mail', 'ls', 'CLI Mail', '--subject', 'lunch', '--json'], env)).json).toHaveLength(1);
    expect((await cli(['mail', 'ls', 'CLI Mail', '--since', '2999-01-01', '--json'], env)).json).toEqual([]);
    expect((await cli(['mail', 'ls', 'CLI Mail', '--since', 'yesterday-ish'], env)).code).toBe(2);
    const text = await cli(['mail', 'ls', 'CLI Mail'], env);
    expect(text.stdout).toMatch(/\* eml_\S+ .*Invoice 1/);

    const show = await cli(['mail', 'show', first], env);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).toContain('Subject:  Invoice 1');
    expect(show.stdout).toMatch(/untrusted[\s\S]*Please pay\.[\s\S]*end of message text/);
    expect(show.stdout).toContain('invoice.txt');
    const out = path.join(work, 'mail-out');
    const get = await cli(['mail', 'get', first, '--out', out, '--mailbox', 'CLI Mail', '--json'], env);
    expect(get.json.files).toHaveLength(2);
    expect(fs.readFileSync(path.join(out, `${first}.eml`), 'utf8')).toContain('Subject: Invoice 1');
    expect(fs.readFileSync(path.join(out, `${first}-invoice.txt`), 'utf8')).toBe('total 10');

    expect((await cli(['mail', 'read', first], env)).code).toBe(0);
    expect((await cli(['mail', 'ls', 'CLI Mail', '--unread', '--json'], env)).json.map((e: { subject: string }) => e.subject)).toEqual(['Lunch?']);
    expect((await cli(['mail', 'unread', first, '--json'], env)).json[0]).toMatchObject({ id: first, read: false });
    expect((await cli(['mail', 'show', 'eml_01NOPE0000000000000000000'], env)).code).toBe(3);

    const attachment = write('report.txt', 'the report');
    const sent = await cli(['mail', 'send', 'CLI Mail', '--to', user.email, '--subject', 'Report', '--text', 'Attached.', '--attach', attachment, '--json'], env);
    expect(sent.code, sent.stderr).toBe(0);
    expect(sent.json).toMatchObject({ direction: 'sent', subject: 'Report' });
    const piped = await cli(['mail', 'send', 'CLI Mail', '--to', user.email, '-s', 'Piped'], env, { input: 'from stdin' });
    expect(piped.code, piped.stderr).toBe(0);
    expect((await cli(['mail', 'send', 'CLI Mail', '--to', user.email, '--text', 'x'], env)).code).toBe(2);
    const reply = await cli(['mail', 'reply', first, '--to', user.email, '--text', 'Paid.', '--json'], env);
    expect(reply.code, reply.stderr).toBe(0);
    expect(reply.json.subject).toBe('Re: Invoice 1');
    expect((await cli(['mail', 'ls', 'CLI Mail', '--sent', '--json'], env)).json).toHaveLength(3);
  });

  it('mail watch: one JSON line per new email; after a restart it catches up from the saved cursor; Ctrl-C exits 0', async () => {
    const box = await newBox('CLI Watch');
    const child = startCli(['mail', 'watch', 'CLI Watch'], env);
    const done = finished(child);
    await waitForOutput(child, (t) => t.includes('Watching'), 'stderr');
    const live = (await sendMail(app, { to: box.email.address, subject: 'Live one' })).emailIds[0]!;
    await waitForOutput(child, (t) => t.includes(live));
    child.kill('SIGINT');
    const first = await done;
    expect(first.code).toBe(0);
    expect(first.stdout.trim().split('\n')).toHaveLength(1);

    const missed = (await sendMail(app, { to: box.email.address, subject: 'While stopped' })).emailIds[0]!;
    const again = startCli(['mail', 'watch', 'CLI Watch', '--json'], env);
    const done2 = finished(again);
    const seen = await waitForOutput(again, (t) => t.includes(missed));
    again.kill('SIGINT');
    expect((await done2).code).toBe(0);
    const lines = seen.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.map((e) => e.id)).toEqual([missed]);
  });

  it('publish a folder (spinner-free off a terminal), sites ls, a password shown once, unpublish', async () => {
    const site = path.join(work, 'site');
    write('site/index.html', '<!doctype html><title>CLI site</title><h1>Hello from the CLI</h1>');
    write('site/about.html', '<!doctype html><title>About</title>');
    const pub = await cli(['publish', site, 'CLI Site', '--json'], env);
    expect(pub.code, pub.stderr).toBe(0);
    expect(pub.json).toMatchObject({ publish_state: 'ready', uploaded: 2 });
    const page = await siteFetch(pub.json.public_url);
    expect(page.status).toBe(200);
    expect(page.text).toContain('Hello from the CLI');

    // a file removed from the folder is removed from the site on the next publish
    fs.rmSync(path.join(site, 'about.html'));
    const again = await cli(['publish', site, 'CLI Site'], env);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout.trim()).toBe(pub.json.public_url);
    expect((await siteFetch(`${pub.json.public_url.replace(/\/$/, '')}/about.html`)).status).toBe(404);

    const ls = await cli(['sites', 'ls', '--json'], env);
    expect(ls.json.map((p: { id: string }) => p.id)).toContain(pub.json.id);
    const protectedSite = await cli(['publish', site, 'CLI Site', '--password'], env);
    expect(protectedSite.code, protectedSite.stderr).toBe(0);
    expect(protectedSite.stdout).toMatch(/Password: \S+/);
    // Now behind the password: the gate page answers 200 (docs/compat.md) and says what it wants.
    const gate = await siteFetch(pub.json.public_url);
    expect(gate.headers['x-cubby-access']).toBe('password_required');
    expect(gate.text).not.toContain('Hello from the CLI');
    const preview = await cli(['publish', site, 'CLI Site', '--preview', '--json'], env);
    expect(preview.code, preview.stderr).toBe(0);
    expect(preview.json).toMatchObject({ kind: 'preview', publish_state: 'ready' });
    expect((await cli(['publish', site, 'CLI Site', '--password', '--require-email'], env)).code).toBe(2);
    expect((await cli(['unpublish', 'CLI Site'], env)).code).toBe(0);
    expect((await cli(['unpublish', 'CLI Site', '--preview'], env)).code).toBe(0);
  });

  it('webhook set refuses a private URL; show/deliveries/rm without one', async () => {
    await newBox('CLI Hook');
    // The service refuses private webhook URLs, which is all a test has: set one it accepts the shape of.
    const set = await cli(['webhook', 'set', 'CLI Hook', 'http://127.0.0.1/hook'], env);
    expect(set.code).toBe(1);
    expect(set.stderr).toContain('INVALID_EMAIL_WEBHOOK');
    expect((await cli(['webhook', 'show', 'CLI Hook'], env)).stdout).toContain('No webhook');
    expect((await cli(['webhook', 'deliveries', 'CLI Hook', '--json'], env)).json).toEqual([]);
    expect((await cli(['webhook', 'rm', 'CLI Hook', '--json'], env)).json).toMatchObject({ deleted: true });
    // Delivery and `webhook test` against a real receiver: test/cli-webhook.test.ts.
  });

  it('address show; domains add (DNS records table), ls, show, verify, rm', async () => {
    const box = await newBox('CLI Address');
    expect((await cli(['address', 'show', 'CLI Address'], env)).stdout).toContain(box.email.address);
    const pilot = await app.user({ plan: 'pilot' });
    const penv = { ...env, CUBBY_API_KEY: pilot.key };
    const host = `mail-${Date.now()}.example.org`;
    const add = await cli(['domains', 'add', host], penv);
    expect(add.code, add.stderr).toBe(0);
    expect(add.stdout).toMatch(/TYPE\s+NAME\s+VALUE/);
    expect(add.stdout).toContain('TXT');
    expect((await cli(['domains', 'ls'], penv)).stdout).toContain(host);
    expect((await cli(['domains', 'show', host, '--json'], penv)).json.hostname).toBe(host);
    expect((await cli(['domains', 'verify', host], penv)).code).toBe(0);
    expect((await cli(['domains', 'rm', host, '--json'], penv)).json).toMatchObject({ deleted: true });
    expect((await cli(['domains', 'show', host], penv)).code).toBe(3);
  });
});
