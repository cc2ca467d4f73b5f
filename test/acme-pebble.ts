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

export async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
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
