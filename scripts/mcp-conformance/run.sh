#!/usr/bin/env bash
# Runs the MCP conformance suite (@modelcontextprotocol/conformance) against a fresh Cubby:
# a throwaway data dir and SQLite database, one person with an API key, the server on a free
# port, and auth-proxy.mjs in front of it to add the key (the suite sends no credentials).
# The suite needs Node 22; the npm package node@22 provides it without touching the system Node.
# Prints the suite's summary; results land in $OUT (default: a temporary folder).
# See docs/agent-access.md for which scenarios pass and why the rest do not apply.
set -uo pipefail
cd "$(dirname "$0")/../.."
VERSION="${CUBBY_CONFORMANCE_VERSION:-0.1.16}"
data="$(mktemp -d "${TMPDIR:-/tmp}/cubby-conformance-XXXXXX")"
OUT="${OUT:-$data/results}"
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
http_port="$(free_port)"; proxy_port="$(free_port)"
export CUBBY_DATA_DIR="$data" CUBBY_HTTP_PORT="$http_port" CUBBY_SMTP_PORT=0 CUBBY_SITES_PORT=0 CUBBY_LOG_LEVEL=warn
export CUBBY_SECRET_KEY="$(node -e 'console.log(require("crypto").randomBytes(32).toString("hex"))')"
export CUBBY_MCP_ALLOWED_HOSTS="127.0.0.1:$proxy_port"
unset CUBBY_DATABASE_URL CUBBY_DATABASE_SCHEMA CUBBY_PUBLIC_URL

node bin/cubby.js admin create-user --email conformance@example.com --password 'conformance password 1' --name Conformance >/dev/null || exit 1
CUBBY_TOKEN="$(node bin/cubby.js admin create-key --email conformance@example.com --label conformance | node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const j=JSON.parse(s);console.log(j.api_key)})')"
export CUBBY_TOKEN
node bin/cubby.js serve >"$data/server.log" 2>&1 & server=$!
node scripts/mcp-conformance/auth-proxy.mjs "$proxy_port" "http://127.0.0.1:$http_port" & proxy=$!
trap 'kill $server $proxy 2>/dev/null; wait $server $proxy 2>/dev/null' EXIT
for _ in $(seq 1 60); do curl -s -o /dev/null "http://127.0.0.1:$http_port/healthz" && break; sleep 0.5; done

npx -y -p node@22 -p "@modelcontextprotocol/conformance@$VERSION" conformance server \
  --url "http://127.0.0.1:$proxy_port/mcp" --suite all -o "$OUT" 2>&1 \
  | grep -v -e 'EBADENGINE' -e 'package:' -e 'required:' -e 'current:' -e '^npm warn }' -e 'nodedir' \
  | sed -n '/=== SUMMARY ===/,$p'
echo "Results: $OUT"
