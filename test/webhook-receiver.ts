import { execFile } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { startTestApp, type DatabaseKind, type TestApp } from './harness.ts';

// A real HTTPS webhook receiver for tests: a self-signed certificate made with openssl (for the
// name hooks.test and 127.0.0.1), which the app under test trusts through CUBBY_WEBHOOK_CA_FILE.
// Every request is recorded and its Standard Webhooks signature checked with the `standardwebhooks`
// package; what the receiver answers is up to the test.

export const RECEIVER_HOST = 'hooks.test';

export interface TestCert {
  dir: string;
  keyFile: string;
  certFile: string;
}

export async function makeCert(): Promise<TestCert> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-hook-cert-'));
  const keyFile = path.join(dir, 'key.pem');
  const certFile = path.join(dir, 'cert.pem');
  await promisify(execFile)('openssl', [
    'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '2',
    '-subj', `/CN=${RECEIVER_HOST}`, '-addext', `subjectAltName=DNS:${RECEIVER_HOST},IP:127.0.0.1`,
  ]);
  return { dir, keyFile, certFile };
}

export interface ReceivedHook {
  path: string;
  headers: Record<string, string>;
  body: string;
  json: any;
  /** Signature checked with standardwebhooks against `secret`. */
  verified: boolean;
}

export type Responder = (req: ReceivedHook) => { status: number; headers?: Record<string, string>; body?: string | Buffer };

export class Receiver {
  readonly received: ReceivedHook[] = [];
  secret: string | null = null;
  /** Checks signatures without the library's 5-minute clock window (for tests that move the app clock). */
  ignoreTimestamp = false;
  respond: Responder = () => ({ status: 204 });
  private server: https.Server | undefined;
  private waiters: { n: number; resolve: () => void }[] = [];
  port = 0;

  constructor(private readonly cert: TestCert) {}

  async start(port = 0): Promise<void> {
    this.server = https.createServer({ key: fs.readFileSync(this.cert.keyFile), cert: fs.readFileSync(this.cert.certFile) }, (req, res) => {
      const parts: Buffer[] = [];
      req.on('data', (d: Buffer) => parts.push(d));
      req.on('end', () => {
        const body = Buffer.concat(parts).toString('utf8');
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
        const hook: ReceivedHook = { path: req.url ?? '', headers, body, json: safeJson(body), verified: this.verify(headers, body) };
        this.received.push(hook);
        const answer = this.respond(hook);
        res.writeHead(answer.status, answer.headers);
        res.end(answer.body);
        for (const w of this.waiters.splice(0)) {
          if (this.received.length >= w.n) w.resolve();
          else this.waiters.push(w);
        }
      });
    });
    await new Promise<void>((resolve) => this.server!.listen(port, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    if (!this.server) return;
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server!.close(() => resolve()));
    this.server = undefined;
  }

  url(p = '/hook'): string {
    return `https://${RECEIVER_HOST}:${this.port}${p}`;
  }

  /** Resolves once `n` requests in total have arrived. */
  waitFor(n: number): Promise<void> {
    if (this.received.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }

  private verify(headers: Record<string, string>, body: string): boolean {
    if (!this.secret) return false;
    const wh = new Webhook(this.secret);
    try {
      if (this.ignoreTimestamp) {
        const expected = wh.sign(headers['webhook-id']!, new Date(Number(headers['webhook-timestamp']) * 1000), body);
        return headers['webhook-signature']!.split(' ').includes(expected);
      }
      wh.verify(body, headers);
      return true;
    } catch {
      return false;
    }
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

/** A DNS (AppOptions.resolver shape) that knows only the receiver's name, and `extra` names. */
export function receiverDns(extra: Record<string, string[]> = {}) {
  const zone: Record<string, string[]> = { [RECEIVER_HOST]: ['127.0.0.1'], ...extra };
  return async (name: string, rrtype: string): Promise<unknown> => {
    const all = zone[name.toLowerCase()];
    const want = (all ?? []).filter((a) => (rrtype === 'AAAA' ? a.includes(':') : rrtype === 'A' ? !a.includes(':') : false));
    if (!want.length) throw Object.assign(new Error(`queryA ENOTFOUND ${name}`), { code: 'ENOTFOUND' });
    return want;
  };
}

/** An app that trusts the receiver's certificate, may call private addresses, and runs on a clock tests move forward. */
export async function startHookApp(kind: DatabaseKind, cert: TestCert, extraEnv: Record<string, string> = {}) {
  const clock = { offsetMs: 0 };
  const app = await startTestApp(
    kind,
    { CUBBY_WEBHOOK_ALLOW_PRIVATE: 'true', CUBBY_WEBHOOK_CA_FILE: cert.certFile, ...extraEnv },
    { resolver: receiverDns(), now: () => new Date(Date.now() + clock.offsetMs), events: { retry: { random: () => 0.5 } } },
  );
  return { app, clock };
}

/** Sets the mailbox's webhook; returns the API answer's webhook object. */
export async function setWebhook(app: TestApp, key: string, mailboxId: string, url: string, extra: Record<string, unknown> = {}) {
  const res = await app.request('PUT', `/v1/mailboxes/${mailboxId}/email/webhook`, { key, body: { webhook_url: url, ...extra } });
  if (res.status !== 200) throw new Error(`PUT webhook: ${res.status} ${res.text}`);
  return res.body.data.webhook;
}

export async function deliveries(app: TestApp, key: string, mailboxId: string): Promise<any[]> {
  const res = await app.request('GET', `/v1/mailboxes/${mailboxId}/email/webhook/deliveries`, { key, query: { limit: 100 } });
  if (res.status !== 200) throw new Error(`GET deliveries: ${res.status} ${res.text}`);
  return res.body.data.deliveries;
}

/** Runs every job that is due on the app's clock (first attempts and retries). */
export async function drain(app: TestApp): Promise<void> {
  await app.started.deps.jobs.worker!.drain();
}
