import { execFile, spawn } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import type { TestCert } from './webhook-receiver.ts';

// A real git smart-HTTP server for tests: HTTPS (a self-signed certificate the app trusts through
// CUBBY_GIT_CA_FILE) in front of `git http-backend`, bridged as CGI. Repositories are bare
// repositories in a temporary folder; each has a work tree the test commits in and pushes from
// (over the file system, as a developer pushing to the host would). With a token set, every
// request must carry it as the Basic-auth password, as GitHub and Gitea check it.

const run = promisify(execFile);
const GIT_ENV = { GIT_CONFIG_NOSYSTEM: '1', HOME: os.tmpdir(), GIT_AUTHOR_NAME: 'Test', GIT_AUTHOR_EMAIL: 'test@example.com', GIT_COMMITTER_NAME: 'Test', GIT_COMMITTER_EMAIL: 'test@example.com' };

export class GitServer {
  readonly root = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-git-server-'));
  /** Required Basic-auth password of every request (null: anonymous reads allowed). */
  token: string | null = null;
  readonly requests: { method: string; path: string; status: number }[] = [];
  /** Repositories that answer 301 to another one (a renamed repository): old name → new name. */
  readonly redirects: Record<string, string> = {};
  private server: https.Server | undefined;
  port = 0;

  constructor(private readonly cert: TestCert) {}

  async start(): Promise<void> {
    this.server = https.createServer({ key: fs.readFileSync(this.cert.keyFile), cert: fs.readFileSync(this.cert.certFile) }, (req, res) => {
      const url = new URL(req.url ?? '/', 'https://git.test');
      const record = (status: number) => this.requests.push({ method: req.method ?? 'GET', path: url.pathname, status });
      const moved = Object.entries(this.redirects).find(([from]) => url.pathname.startsWith(`/${from}.git/`));
      if (moved) {
        record(301);
        res.writeHead(301, { location: `${this.url(moved[1])}${url.pathname.slice(moved[0].length + 5)}${url.search}` });
        res.end();
        return;
      }
      if (this.token !== null) {
        const auth = req.headers.authorization ?? '';
        const password = auth.startsWith('Basic ') ? Buffer.from(auth.slice(6), 'base64').toString('utf8').split(':').slice(1).join(':') : null;
        if (password !== this.token) {
          record(401);
          res.writeHead(401, { 'www-authenticate': 'Basic realm="git"' });
          res.end('authentication required');
          return;
        }
      }
      const cgi = spawn('git', ['http-backend'], {
        env: {
          ...process.env,
          GIT_PROJECT_ROOT: this.root,
          GIT_HTTP_EXPORT_ALL: '1',
          PATH_INFO: decodeURIComponent(url.pathname),
          QUERY_STRING: url.search.slice(1),
          REQUEST_METHOD: req.method ?? 'GET',
          CONTENT_TYPE: req.headers['content-type'] ?? '',
          HTTP_CONTENT_ENCODING: req.headers['content-encoding'] ?? '',
          GIT_PROTOCOL: String(req.headers['git-protocol'] ?? ''),
          REMOTE_ADDR: '127.0.0.1',
        },
      });
      req.pipe(cgi.stdin);
      let head = Buffer.alloc(0);
      let headerDone = false;
      cgi.stdout.on('data', (chunk: Buffer) => {
        if (headerDone) return void res.write(chunk);
        head = Buffer.concat([head, chunk]);
        const crlf = head.indexOf('\r\n\r\n');
        const lf = head.indexOf('\n\n');
        const end = crlf >= 0 && (lf < 0 || crlf < lf) ? crlf : lf;
        if (end < 0) return;
        const sep = end === crlf ? 4 : 2;
        const headers: Record<string, string> = {};
        let status = 200;
        for (const line of head.subarray(0, end).toString('latin1').split(/\r?\n/)) {
          const i = line.indexOf(':');
          if (i < 0) continue;
          const k = line.slice(0, i).trim();
          const v = line.slice(i + 1).trim();
          if (k.toLowerCase() === 'status') status = Number(v.split(' ')[0]);
          else headers[k] = v;
        }
        headerDone = true;
        record(status);
        res.writeHead(status, headers);
        res.write(head.subarray(end + sep));
      });
      cgi.on('close', () => {
        if (!headerDone) {
          record(500);
          res.writeHead(500);
        }
        res.end();
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    if (this.server) {
      this.server.closeAllConnections();
      await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    }
    fs.rmSync(this.root, { recursive: true, force: true });
  }

  url(name: string): string {
    return `https://127.0.0.1:${this.port}/${name}.git`;
  }

  /** A new bare repository `name` with a work tree; returns a handle to commit and push. */
  async repo(name: string, branch = 'main'): Promise<TestRepo> {
    const bare = path.join(this.root, `${name}.git`);
    const work = path.join(this.root, `${name}-work`);
    await git(this.root, 'init', '--bare', '-q', '-b', branch, bare);
    await git(this.root, 'init', '-q', '-b', branch, work);
    await git(work, 'remote', 'add', 'origin', bare);
    return new TestRepo(work, branch);
  }
}

export class TestRepo {
  constructor(
    readonly work: string,
    private branch: string,
  ) {}

  /** Writes (string or bytes) and deletes (null) files, commits and pushes; returns the commit id. */
  async commit(files: Record<string, string | Buffer | null>, message = 'change', opts: { branch?: string } = {}): Promise<string> {
    const branch = opts.branch ?? this.branch;
    if (branch !== (await this.current())) await git(this.work, 'checkout', '-q', '-B', branch);
    for (const [p, content] of Object.entries(files)) {
      const full = path.join(this.work, p);
      if (content === null) fs.rmSync(full, { force: true });
      else {
        fs.mkdirSync(path.dirname(full), { recursive: true });
        fs.writeFileSync(full, content);
      }
    }
    await git(this.work, 'add', '-A');
    await git(this.work, 'commit', '-q', '--allow-empty', '-m', message);
    await git(this.work, 'push', '-q', 'origin', branch);
    return (await git(this.work, 'rev-parse', 'HEAD')).trim();
  }

  /** A symbolic link in the repository (not written into the bucket). */
  async symlink(p: string, target: string): Promise<void> {
    fs.symlinkSync(target, path.join(this.work, p));
  }

  private async current(): Promise<string> {
    try {
      return (await git(this.work, 'symbolic-ref', '--short', 'HEAD')).trim();
    } catch {
      return this.branch;
    }
  }
}

async function git(cwd: string, ...args: string[]): Promise<string> {
  const { stdout } = await run('git', args, { cwd, env: { ...process.env, ...GIT_ENV } });
  return stdout;
}
