// `npm run bench:events`: how long after SMTP's 250 an email.received event reaches a webhook
// receiver and a live WebSocket subscriber, on the real server (`node bin/cubby.js serve`, SQLite
// and fs store by default, in a fresh `chattr +T` run dir under bench/.tmp).
// The bench runs an HTTPS receiver (self-signed certificate, trusted by the server through
// CUBBY_WEBHOOK_CA_FILE; CUBBY_WEBHOOK_ALLOW_PRIVATE=true since it listens on 127.0.0.1) and one
// ActionCable connection per mailbox. It sends MESSAGES messages over one SMTP connection, paced at
// RATE per second (0 = as fast as the 250s come), round-robin over MAILBOXES mailboxes, each with its
// own webhook. Latency per message: receipt of the 250 reply → webhook request received, and → live
// push received, all on this process's clock. Prints one JSON line.
// Env: MESSAGES (1000), RATE (50), MAILBOXES (10), WARMUP (50), KEEP_RUN_DIR=1, BENCH_SCRATCH,
// BENCH_DATABASE_URL (postgres://… to run against Postgres in a fresh schema), SERVE_NODE_ARGS, SERVE_STDOUT_FILE.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import nodemailer from 'nodemailer';
import pg from 'pg';
import { WebSocket } from 'ws';
import { adminUserAndKey, procMemory, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { client, cpuSince, cpuSplit, gitCommit, log, makeRunDir, round, serveOptions } from './lib.ts';
import { percentile } from './smtp-client.ts';

const MESSAGES = Number(process.env.MESSAGES ?? 1000);
const RATE = Number(process.env.RATE ?? 50);
const MAILBOXES = Number(process.env.MAILBOXES ?? 10);
const WARMUP = Number(process.env.WARMUP ?? 50);
const DATABASE_URL = process.env.BENCH_DATABASE_URL;
const GOAL = { p50_ms: 50, p99_ms: 250 };

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });
}

function makeCert(dir: string) {
  const keyFile = path.join(dir, 'hook-key.pem');
  const certFile = path.join(dir, 'hook-cert.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', keyFile, '-out', certFile, '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  return { keyFile, certFile };
}

/** email id → time of each milestone (performance.now() of this process). */
const times = new Map<string, { ok?: number; hook?: number; live?: number }>();
const stamp = (id: string, what: 'ok' | 'hook' | 'live') => {
  const t = times.get(id) ?? {};
  t[what] ??= performance.now();
  times.set(id, t);
};
let hooks = 0;
let lives = 0;
let waiter: { need: () => boolean; resolve: () => void } | null = null;
const check = () => {
  if (waiter?.need()) {
    waiter.resolve();
    waiter = null;
  }
};

function startReceiver(cert: { keyFile: string; certFile: string }): Promise<https.Server> {
  const server = https.createServer({ key: fs.readFileSync(cert.keyFile), cert: fs.readFileSync(cert.certFile), keepAlive: true }, (req, res) => {
    const parts: Buffer[] = [];
    req.on('data', (d: Buffer) => parts.push(d));
    req.on('end', () => {
      const id = JSON.parse(Buffer.concat(parts).toString()).data.email_id as string;
      stamp(id, 'hook');
      hooks++;
      res.writeHead(204).end();
      check();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function subscribe(api: ReturnType<typeof client>, mailboxId: string): Promise<WebSocket> {
  const t = (await api('GET', `/v1/mailboxes/${mailboxId}/email/subscription`)).data.subscription;
  const ws = new WebSocket(`${t.websocket_url}?email_subscription_token=${t.token}`, ['actioncable-v1-json']);
  const identifier = JSON.stringify({ channel: 'EmailReceivedChannel', account_id: t.account_id, mailbox_id: t.mailbox_id });
  await new Promise<void>((resolve, reject) => {
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.type === 'welcome') ws.send(JSON.stringify({ command: 'subscribe', identifier }));
      else if (f.type === 'confirm_subscription') resolve();
      else if (f.type === 'reject_subscription' || f.type === 'disconnect') reject(new Error(`live: ${d}`));
      else if (f.message?.data?.email_id) {
        stamp(f.message.data.email_id, 'live');
        lives++;
        check();
      }
    });
    ws.on('error', reject);
  });
  return ws;
}

async function sendAll(smtpPort: number, addresses: string[], count: number, rate: number): Promise<number> {
  const transport = nodemailer.createTransport({ host: '127.0.0.1', port: smtpPort, secure: false, ignoreTLS: true, pool: true, maxConnections: 1, maxMessages: Infinity });
  const t0 = performance.now();
  try {
    for (let i = 0; i < count; i++) {
      if (rate > 0) {
        const due = t0 + (i * 1000) / rate;
        const wait = due - performance.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
      const info = await transport.sendMail({ from: 'sender@source.test', to: addresses[i % addresses.length], subject: `event ${i}`, text: `Message ${i}.\n` });
      for (const id of info.response.match(/eml_[A-Za-z0-9]+/g) ?? []) stamp(id, 'ok');
    }
  } finally {
    transport.close();
  }
  return (performance.now() - t0) / 1000;
}

function until(need: () => boolean, timeoutMs: number): Promise<boolean> {
  if (need()) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiter = null;
      resolve(false);
    }, timeoutMs);
    waiter = { need, resolve: () => (clearTimeout(timer), resolve(true)) };
  });
}

function stats(values: number[]) {
  const p = (q: number) => {
    const v = percentile(values, q);
    return v === null ? null : round(v, 1);
  };
  return { count: values.length, p50_ms: p(50), p90_ms: p(90), p99_ms: p(99), max_ms: p(100) };
}

async function main() {
  const runDir = makeRunDir('events');
  let server: ServeProcess | undefined;
  let receiver: https.Server | undefined;
  const sockets: WebSocket[] = [];
  const schema = DATABASE_URL ? `bench_events_${randomBytes(4).toString('hex')}` : undefined;
  try {
    const cert = makeCert(runDir);
    receiver = await startReceiver(cert);
    const hookPort = (receiver.address() as net.AddressInfo).port;
    const smtpPort = await freePort();
    const env = serveEnv(path.join(runDir, 'data'), {
      CUBBY_SMTP_PORT: String(smtpPort),
      CUBBY_HTTP_PORT: String(await freePort()),
      CUBBY_WEBHOOK_ALLOW_PRIVATE: 'true',
      CUBBY_WEBHOOK_CA_FILE: cert.certFile,
      ...(DATABASE_URL ? { CUBBY_DATABASE_URL: DATABASE_URL, CUBBY_DATABASE_SCHEMA: schema! } : {}),
    });
    const { key } = await adminUserAndKey(env, 'pilot');
    server = await startServe(env, serveOptions());
    log(`cubby serve pid ${server.pid}: API ${server.base}, SMTP 127.0.0.1:${smtpPort}, receiver https://127.0.0.1:${hookPort}, ${DATABASE_URL ? 'Postgres' : 'SQLite'}`);
    const api = client(server.base, key);
    const addresses: string[] = [];
    for (let i = 0; i < MAILBOXES; i++) {
      const m = (await api('POST', '/v1/mailboxes', { mailbox: { title: `events ${i}` } })).data.mailbox;
      await api('PUT', `/v1/mailboxes/${m.id}/email/webhook`, { webhook_url: `https://127.0.0.1:${hookPort}/hook/${m.id}` });
      sockets.push(await subscribe(api, m.id));
      addresses.push(m.email.address);
    }
    log(`${MAILBOXES} mailboxes with a webhook and a live subscription each; warm-up ${WARMUP}`);
    await sendAll(smtpPort, addresses, WARMUP, RATE);
    await until(() => hooks >= WARMUP && lives >= WARMUP, 30_000);
    times.clear();
    hooks = 0;
    lives = 0;

    const cpu0 = cpuSplit(server.pid);
    const seconds = await sendAll(smtpPort, addresses, MESSAGES, RATE);
    const complete = await until(() => hooks >= MESSAGES && lives >= MESSAGES, 60_000);
    const cpu = cpuSince(server.pid, cpu0);
    log(`sent ${MESSAGES} in ${round(seconds, 1)} s; webhooks ${hooks}, live ${lives}${complete ? '' : ' (incomplete after 60 s)'}`);
    const hook: number[] = [];
    const live: number[] = [];
    for (const t of times.values()) {
      if (t.ok === undefined) continue;
      if (t.hook !== undefined) hook.push(Math.max(0, t.hook - t.ok));
      if (t.live !== undefined) live.push(Math.max(0, t.live - t.ok));
    }
    const webhook = stats(hook);
    const liveStats = stats(live);
    const met = webhook.p50_ms !== null && webhook.p99_ms !== null && liveStats.p50_ms !== null && liveStats.p99_ms !== null
      && webhook.p50_ms < GOAL.p50_ms && webhook.p99_ms < GOAL.p99_ms && liveStats.p50_ms < GOAL.p50_ms && liveStats.p99_ms < GOAL.p99_ms && complete;
    const result = {
      bench: 'events',
      at: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      commit: gitCommit(),
      database: DATABASE_URL ? 'postgres' : 'sqlite',
      config: { messages: MESSAGES, rate_per_s: RATE, mailboxes: MAILBOXES, warmup: WARMUP },
      send_seconds: round(seconds, 2),
      webhook,
      live: liveStats,
      delivered: { webhooks: hooks, live: lives, complete },
      server: { cpu_s: cpu.all, cpu_main_thread_s: cpu.main_thread, rss_mb_max: round(procMemory(server.pid).hwm / 1024 / 1024, 0) },
      goal: { ...GOAL, met, note: 'latency from the 250 reply; the machine is shared (2 cores)' },
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    for (const s of sockets) s.terminate();
    await server?.stop();
    receiver?.closeAllConnections();
    receiver?.close();
    if (schema) {
      const c = new pg.Client({ connectionString: DATABASE_URL });
      await c.connect();
      await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await c.end();
    }
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  }
}

await main();
