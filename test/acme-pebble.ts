import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import https from 'node:https';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';

// Pebble (Let's Encrypt's ACME test server, Debian package `pebble`) for the ACME tests: its own
// TLS certificate made with openssl, its DNS pointed at the test's name server, and its HTTP-01
// validation pointed at the sites server's port.

export const PEBBLE = '/usr/bin/pebble';
export const HAVE_PEBBLE = fs.existsSync(PEBBLE) && fs.existsSync('/usr/bin/openssl');

/**
 * A port for a server that starts later (Pebble's listeners, the app's sites listeners), taken
 * below the kernel's ephemeral range. A port from `listen(0)` is free again until its server
 * starts, and meanwhile an outgoing connection of any test running beside this one may be given
 * it as its local port: the server then fails with EADDRINUSE (seen in CI). Ports below that range
 * are never handed out so; one is checked free and never given twice by this process.
 */
export async function freePort(): Promise<number> {
  const low = ephemeralRangeStart();
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = FIXED_PORTS_FROM + Math.floor(Math.random() * (low - FIXED_PORTS_FROM));
    if (given.has(port) || !(await canListen(port))) continue;
    given.add(port);
    return port;
  }
  throw new Error(`no free port from ${FIXED_PORTS_FROM} to ${low - 1}`);
}

const FIXED_PORTS_FROM = 10_000;
const given = new Set<number>();

function ephemeralRangeStart(): number {
  try {
    const start = Number(fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]);
    if (Number.isInteger(start) && start > FIXED_PORTS_FROM + 1000) return start;
  } catch {
    // not Linux: the IANA range's start
  }
  return 49_152;
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen(port, '127.0.0.1', () => s.close(() => resolve(true)));
  });
}

export interface Pebble {
  directoryUrl: string;
  caFile: string;
  /** Pebble's issuing root (PEM), fetched from its management port. */
  root(): Promise<string>;
  stop(): Promise<void>;
}

export async function startPebble(opts: { dnsServer: string; httpPort: number }): Promise<Pebble> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'cubby-pebble-'));
  const cert = path.join(dir, 'cert.pem');
  const key = path.join(dir, 'key.pem');
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', key, '-out', cert], { stdio: 'ignore' });
  const [acmePort, mgmtPort, tlsPort] = [await freePort(), await freePort(), await freePort()];
  const config = path.join(dir, 'pebble.json');
  fs.writeFileSync(
    config,
    JSON.stringify({ pebble: { listenAddress: `127.0.0.1:${acmePort}`, managementListenAddress: `127.0.0.1:${mgmtPort}`, certificate: cert, privateKey: key, httpPort: opts.httpPort, tlsPort, ocspResponderURL: '', externalAccountBindingRequired: false } }),
  );
  const child: ChildProcess = spawn(PEBBLE, ['-config', config, '-dnsserver', opts.dnsServer, '-strict=false'], {
    env: { ...process.env, PEBBLE_VA_NOSLEEP: '1', PEBBLE_WFE_NONCEREJECT: '0', PEBBLE_AUTHZREUSE: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  await new Promise<void>((resolve, reject) => {
    const onData = (b: Buffer) => {
      log += b.toString();
      if (log.includes('Listening on')) resolve();
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => reject(new Error(`pebble exited (${code}): ${log}`)));
  });
  const ca = fs.readFileSync(cert);
  return {
    directoryUrl: `https://127.0.0.1:${acmePort}/dir`,
    caFile: cert,
    root: () =>
      new Promise((resolve, reject) => {
        https.get(`https://127.0.0.1:${mgmtPort}/roots/0`, { ca }, (res) => {
          let body = '';
          res.on('data', (c) => (body += c));
          res.on('end', () => resolve(body));
        }).on('error', reject);
      }),
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await exited;
      }
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
