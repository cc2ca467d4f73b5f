// A forwarding proxy for the MCP conformance suite, which cannot send credentials: every request
// to 127.0.0.1:<listen port> goes to the target with `Authorization: Bearer $CUBBY_TOKEN` added.
// Host and Origin pass through untouched, so the server's DNS-rebinding checks still see what
// the suite sent (start the server with CUBBY_MCP_ALLOWED_HOSTS=127.0.0.1:<listen port>).
// Usage: CUBBY_TOKEN=… node auth-proxy.mjs <listen port> <target base URL>
import http from 'node:http';

const [listenPort, target] = process.argv.slice(2);
const t = new URL(target);
const server = http.createServer((req, res) => {
  const headers = { ...req.headers, authorization: `Bearer ${process.env.CUBBY_TOKEN}` };
  const out = http.request({ host: t.hostname, port: t.port, path: req.url, method: req.method, headers, setHost: false }, (r) => {
    res.writeHead(r.statusCode ?? 502, r.headers);
    r.pipe(res);
  });
  out.on('error', () => res.writeHead(502).end());
  req.pipe(out);
});
server.listen(Number(listenPort), '127.0.0.1');
