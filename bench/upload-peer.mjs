// The peer of `npm run bench:uploads` (a): the least a durable upload server does for each PUT,
// with nothing of Cubby's, measured in the same run: what the machine gives the least durable
// upload server at that moment, beside Cubby's small-file figure. Each PUT's body is read, its
// Content-MD5 checked, and it is written to a file named by its SHA-256, fdatasynced, with its
// folder fsynced after (a durable create), before the 200. Plain JavaScript on node:http, started
// as `node bench/upload-peer.mjs DIR`; prints {"port":N} once listening.
import { createHash } from 'node:crypto';
import fsp from 'node:fs/promises';
import http from 'node:http';
import path from 'node:path';

const dir = process.argv[2];
if (!dir) {
  console.error('usage: node bench/upload-peer.mjs DIR');
  process.exit(2);
}

async function store(body) {
  const file = await fsp.open(path.join(dir, createHash('sha256').update(body).digest('hex')), 'w');
  try {
    await file.writeFile(body);
    await file.datasync();
  } finally {
    await file.close();
  }
  const folder = await fsp.open(dir, 'r');
  try {
    await folder.sync();
  } finally {
    await folder.close();
  }
}

const server = http.createServer(async (req, res) => {
  try {
    if (req.method !== 'PUT') return void res.writeHead(405).end();
    const chunks = [];
    for await (const chunk of req) chunks.push(chunk);
    const body = Buffer.concat(chunks);
    const md5 = createHash('md5').update(body).digest('base64');
    if (req.headers['content-md5'] !== md5) return void res.writeHead(400).end('Content-MD5 mismatch');
    await store(body);
    res.writeHead(200, { etag: `"${Buffer.from(md5, 'base64').toString('hex')}"` }).end();
  } catch (err) {
    res.writeHead(500).end(String(err));
  }
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(JSON.stringify({ port: server.address().port })));
