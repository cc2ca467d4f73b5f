// `npm run bench:smtp` (when the shared peer harness is not found, or with OWN_CLIENT=1; otherwise
// bench/smtp-harness.ts runs): inbound SMTP ingest of the real server (`node bin/cubby.js serve`, SQLite,
// fs store) in a fresh `chattr +T` run dir under bench/.tmp (see /work/shared/bench/README.md).
// CONNECTIONS concurrent loopback SMTP connections send a mix of 5 KiB text messages and ~100 KiB
// messages with a base64 attachment (ATTACHMENT_RATIO of them) to 100 mailboxes, many messages per
// connection (bench/smtp-client.ts). Reports accepted messages/s (Cubby answers 250 only once the
// message is fsynced and committed), p50/p99 from the end of DATA to the reply, refusals by code,
// the server's peak RSS and CPU, the client's CPU; then checks that the mailboxes' message_count
// adds up to the messages accepted.
// Peers (the same client, messages and settings, in the same run): PEER_SMTP or arguments, comma-
// or space-separated `[name=]host:port[@pid]` (pid: sample that server's CPU and RSS), e.g. Postfix
// smtp-sink. They receive at `box-NNN@PEER_DOMAIN` (default bench.test, Haraka's host_list in the
// shared peer script).
// Env: CONNECTIONS (16), MESSAGES (5000), ATTACHMENT_RATIO (0.2), WARMUP (200), MAILBOXES (100),
// PIPELINING (0; 1 sends MAIL, RCPT and DATA in one write), PLAN (pilot), SKIP_CUBBY=1 (peers
// only), HOLD=1 (boot Cubby, make the mailboxes, print how to point smtp-peers.sh at it, wait for
// Ctrl-C), KEEP_RUN_DIR=1, BENCH_SCRATCH, SERVE_NODE_ARGS (node options for the server, e.g.
// "--cpu-prof --cpu-prof-dir=/tmp/prof"), SERVE_STDOUT_FILE (keeps the server's stdout, where V8's
// traces such as --trace-gc-nvp go), BENCH_DATABASE_URL (postgres://…: Cubby on Postgres in a
// fresh schema, dropped at the end; KEEP_SCHEMA=1 keeps it and prints its name) and SERVE_ENV
// (bench/database.ts), as in the harness mode.
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { adminUserAndKey, procMemory, serveEnv, startServe, type ServeProcess } from '../test/serve-process.ts';
import { client, clientCpu, cpuSince, cpuSplit, gitCommit, inParallel, log, makeRunDir, round, serveOptions } from './lib.ts';
import { percentile, runLoad, type LoadResult } from './smtp-client.ts';
import { makeMessages } from './smtp-messages.ts';
import { findPeerHarness, runWithPeerHarness } from './smtp-harness.ts';
import { benchDatabase, type BenchDatabase } from './database.ts';

const CONNECTIONS = Number(process.env.CONNECTIONS ?? 16);
const MESSAGES = Number(process.env.MESSAGES ?? 5000);
const ATTACHMENT_RATIO = Number(process.env.ATTACHMENT_RATIO ?? 0.2);
const WARMUP = Number(process.env.WARMUP ?? 200);
const MAILBOXES = Number(process.env.MAILBOXES ?? 100);
// Off by default: a server that writes each pipelined reply without TCP_NODELAY (Haraka) holds the
// second reply back until this side ACKs the first, and Linux delays that ACK by up to 40 ms, so a
// pipelined client measured ~44 ms per message against a server that answered in 0.8 ms.
const PIPELINING = process.env.PIPELINING === '1';
// A paid plan with room for the run: 250 mailboxes, 100,000 received messages a month.
const PLAN = process.env.PLAN ?? 'pilot';
const PEER_DOMAIN = process.env.PEER_DOMAIN ?? 'bench.test';
const FROM = 'sender@source.test';
const GOAL_PER_S = 1000;

interface Target {
  name: string;
  host: string;
  port: number;
  pid?: number;
}

function parsePeers(): Target[] {
  const specs = [...(process.env.PEER_SMTP ?? '').split(/[,\s]+/), ...process.argv.slice(2)].filter(Boolean);
  return specs.map((spec) => {
    const m = /^(?:([\w.-]+)=)?([^=@\s]+):(\d+)(?:@(\d+))?$/.exec(spec);
    if (!m) throw new Error(`peer "${spec}": expected [name=]host:port[@pid]`);
    return { name: m[1] ?? `${m[2]}:${m[3]}`, host: m[2]!, port: Number(m[3]), pid: m[4] ? Number(m[4]) : undefined };
  });
}

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

/** Until something accepts on host:port (the SMTP listener may open after the API). */
async function waitPort(host: string, port: number, timeoutMs = 30_000) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((resolve) => {
      const s = net.connect({ host, port }, () => (s.destroy(), resolve(true)));
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing listens on ${host}:${port}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

const mb = (bytes: number) => round(bytes / 1024 / 1024, 0);

/** Warm-up, then the measured run, with the server's CPU and memory when its pid is known. */
async function measure(target: Target, recipients: string[]) {
  const gen0 = performance.now();
  const warm = makeMessages({ count: WARMUP, firstIndex: 0, recipients, attachmentRatio: ATTACHMENT_RATIO, from: FROM });
  const messages = makeMessages({ count: MESSAGES, firstIndex: WARMUP, recipients, attachmentRatio: ATTACHMENT_RATIO, from: FROM });
  const bytes = messages.reduce((n, m) => n + m.data.length, 0);
  log(`${target.name}: ${MESSAGES} messages (${round(bytes / 1e6, 0)} MB) built in ${round((performance.now() - gen0) / 1000, 2)} s; warm-up ${WARMUP}`);
  const load = (msgs: typeof messages) => runLoad({ host: target.host, port: target.port, connections: CONNECTIONS, messages: msgs, from: FROM, pipelining: PIPELINING });
  const warmup = WARMUP > 0 ? await load(warm) : null;
  const cpu0 = target.pid ? cpuSplit(target.pid) : null;
  const client0 = process.cpuUsage();
  const run = await load(messages);
  const clientCpuS = clientCpu(process.cpuUsage(client0));
  const server = target.pid && cpu0 ? serverFigures(target.pid, cpu0, run) : null;
  log(`${target.name}: ${run.accepted}/${run.sent} accepted in ${round(run.seconds, 2)} s = ${round(run.accepted / run.seconds, 0)}/s, refused ${JSON.stringify(run.rejected)}`);
  return { run, warmup, figures: figures(run, bytes, server, clientCpuS) };
}

function serverFigures(pid: number, cpu0: ReturnType<typeof cpuSplit>, run: LoadResult) {
  const cpu = cpuSince(pid, cpu0);
  const mem = procMemory(pid);
  return {
    rss_mb_max: mb(mem.hwm),
    rss_mb_end: mb(mem.rss),
    cpu_s: cpu.all,
    cpu_main_thread_s: cpu.main_thread,
    cpu_ms_per_msg: run.accepted ? round((cpu.all * 1000) / run.accepted, 2) : null,
    cpu_main_thread_ms_per_msg: run.accepted ? round((cpu.main_thread * 1000) / run.accepted, 2) : null,
    // Above 1 s per second: libuv's pool, GC and SQLite threads beside the event loop.
    cpu_cores_busy: round(cpu.all / run.seconds, 2),
  };
}

function figures(run: LoadResult, bytes: number, server: ReturnType<typeof serverFigures> | null, clientCpuS: number) {
  const p = (q: number) => {
    const v = percentile(run.latenciesMs, q);
    return v === null ? null : round(v, 2);
  };
  return {
    messages: run.accepted,
    sent: run.sent,
    seconds: round(run.seconds, 3),
    messages_per_s: round(run.accepted / run.seconds, 0),
    mb_per_s: round(bytes / 1e6 / run.seconds, 1),
    p50_ms: p(50),
    p90_ms: p(90),
    p99_ms: p(99),
    max_ms: p(100),
    rejected: run.rejected,
    ...(run.samples.length ? { rejected_samples: run.samples } : {}),
    pipelining: run.pipelining,
    server,
    client_cpu_s: clientCpuS,
  };
}

/** Sum of message_count over the mailboxes, as surface R reports it. */
async function storedCount(api: ReturnType<typeof client>, ids: string[]) {
  let sum = 0;
  await inParallel(ids, 4, async (id) => {
    // Read first, then add: `sum += await …` would read `sum` before the await and lose updates.
    const count = Number((await api('GET', `/v1/mailboxes/${id}`)).data.mailbox.email.message_count);
    sum += count;
  });
  return sum;
}

async function cubby(runDir: string, database: BenchDatabase, setServer: (s: ServeProcess) => void) {
  const smtpPort = await freePort();
  const env = serveEnv(path.join(runDir, 'data'), { CUBBY_SMTP_PORT: String(smtpPort), CUBBY_HTTP_PORT: String(await freePort()), ...database.env });
  const { key } = await adminUserAndKey(env, PLAN);
  const server = await startServe(env, serveOptions());
  setServer(server);
  log(`cubby serve pid ${server.pid}: API ${server.base}, SMTP 127.0.0.1:${smtpPort}`);
  const api = client(server.base, key);
  const boxes: { id: string; address: string }[] = [];
  await inParallel(Array.from({ length: MAILBOXES }, (_, i) => i), 4, async (i) => {
    const m = (await api('POST', '/v1/mailboxes', { mailbox: { title: `bench ${String(i).padStart(3, '0')}` } })).data.mailbox;
    boxes.push({ id: m.id, address: m.email.address });
  });
  log(`${boxes.length} mailboxes, e.g. ${boxes[0]!.address}`);
  await waitPort('127.0.0.1', smtpPort);
  const target: Target = { name: 'cubby', host: '127.0.0.1', port: smtpPort, pid: server.pid };
  if (process.env.HOLD) {
    // PEERS=smtp_sink: the script sends every peer the same RCPT, and Haraka's host_list refuses Cubby's domain.
    log(`holding; from another shell:\n  PEERS=smtp_sink EXTRA_SMTP=127.0.0.1:${smtpPort} EXTRA_NAME=cubby EXTRA_PID=${server.pid} RCPT=${boxes[0]!.address} /work/shared/bench/smtp-peers.sh\nCtrl-C to stop`);
    await new Promise(() => undefined);
  }
  const { run, warmup, figures: f } = await measure(target, boxes.map((b) => b.address));
  const accepted = run.accepted + (warmup?.accepted ?? 0);
  const stored = await storedCount(api, boxes.map((b) => b.id));
  const durability: Record<string, unknown> = { accepted_incl_warmup: accepted, message_count_sum: stored, ok: stored === accepted };
  if (stored !== accepted) {
    // Tell a lagging count (rows committed after the 250, or counters updated by a job) from lost mail.
    await new Promise((r) => setTimeout(r, 3000));
    durability.message_count_sum_after_3s = await storedCount(api, boxes.map((b) => b.id));
  }
  log(`durability: ${stored} stored of ${accepted} accepted`);
  return { ...f, durability, data_dir_mb: mb(dirBytes(path.join(runDir, 'data'))) };
}

/** Bytes on the wire of each kind of message (the attachment size varies a little with headers). */
function sampleSizes() {
  const sample = makeMessages({ count: 5, firstIndex: 0, recipients: ['box-000@bench.test'], attachmentRatio: 0.2, from: FROM });
  return { text: sample.find((m) => !m.attachment)!.data.length, attachment: sample.find((m) => m.attachment)!.data.length };
}

function dirBytes(dir: string): number {
  // On Postgres with every blob kept in its row, the server may never create its data dir.
  if (!fs.existsSync(dir)) return 0;
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true, recursive: true })) {
    if (e.isFile()) n += fs.statSync(path.join(e.parentPath, e.name)).size;
  }
  return n;
}

async function main() {
  const peers = parsePeers();
  const skipCubby = Boolean(process.env.SKIP_CUBBY);
  const runDir = makeRunDir('smtp');
  // Postgres with BENCH_DATABASE_URL (a fresh schema, dropped at the end), as in the harness mode.
  const database = benchDatabase('smtp');
  let server: ServeProcess | undefined;
  const cleanup = () => {
    if (!process.env.KEEP_RUN_DIR) fs.rmSync(runDir, { recursive: true, force: true });
  };
  process.once('SIGINT', () => {
    void (server?.stop() ?? Promise.resolve()).then(() => database.drop()).finally(() => {
      cleanup();
      process.exit(130);
    });
  });
  try {
    log(`run dir ${runDir}; ${CONNECTIONS} connections, ${MESSAGES} messages, ${ATTACHMENT_RATIO * 100}% with attachment, warm-up ${WARMUP}`);
    const ours = skipCubby ? null : await cubby(runDir, database, (s) => (server = s));
    await server?.stop();
    const peerFigures: Record<string, ReturnType<typeof figures>> = {};
    const recipients = Array.from({ length: MAILBOXES }, (_, i) => `box-${String(i).padStart(3, '0')}@${PEER_DOMAIN}`);
    for (const peer of peers) peerFigures[peer.name] = (await measure(peer, recipients)).figures;
    const ratios = ours
      ? Object.fromEntries(Object.entries(peerFigures).map(([name, f]) => [`cubby_to_${name}`, f.messages_per_s ? round(ours.messages_per_s / f.messages_per_s, 2) : null]))
      : undefined;
    const met = ours ? ours.messages_per_s >= GOAL_PER_S && ours.durability.ok === true && Object.keys(ours.rejected).length === 0 : null;
    const result = {
      bench: 'smtp',
      at: new Date().toISOString(),
      node: process.version,
      cpus: os.cpus().length,
      commit: gitCommit(),
      database: database.kind,
      config: { connections: CONNECTIONS, warmup: WARMUP, attachment_ratio: ATTACHMENT_RATIO, mailboxes: MAILBOXES, plan: PLAN, msg_bytes: sampleSizes() },
      ...(ours ?? {}),
      peers: peerFigures,
      ...(ratios ? { ratios } : {}),
      goal: { messages_per_s: GOAL_PER_S, durable: true, met, note: 'SQLite, fs store, 2 cores; Mailpit publishes 200-300/s' },
    };
    process.stdout.write(`${JSON.stringify(result)}\n`);
  } finally {
    await server?.stop();
    await database.drop();
    cleanup();
  }
}

const harness = findPeerHarness();
if (harness && !process.env.OWN_CLIENT && !process.env.PEER_SMTP && !process.argv[2] && !process.env.HOLD && !process.env.SKIP_CUBBY) await runWithPeerHarness(harness);
else await main();
