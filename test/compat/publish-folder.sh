#!/usr/bin/env bash
# A bucket-era client, as its users have it (curl and jq only): store a folder in a bucket through
# one upload session, publish it, wait until the site is ready and fetch it. It speaks the
# original service's surface A and must work against Cubby unmodified (docs/compat.md).
#
#   CUBBY_URL=http://127.0.0.1:8080 CUBBY_API_KEY=cubby_… publish-folder.sh DIR BUCKET_ID [ROOT_DIR]
#
# Batches of 25 descriptors; each file PUT with exactly the headers returned; finalize_batch after
# each batch; finalize {complete:true} until finalize_pending is false; publish with
# metadata.publication_root_directory; GET /api/v1/publications/{id} every PUBLISH_POLL_INTERVAL_S
# seconds (default 2) until ready or failed; fetch public_url expecting 2xx. The last line printed
# is a JSON summary.
set -euo pipefail

: "${CUBBY_URL:?set CUBBY_URL}" "${CUBBY_API_KEY:?set CUBBY_API_KEY}"
DIR=${1:?folder}
BUCKET_ID=${2:?bucket id}
ROOT=${3:-}
POLL_S=${PUBLISH_POLL_INTERVAL_S:-2}
BATCH=25

# One API call: the CLI always sends a JSON body, {} on GET too. A non-2xx answer prints the
# error body on stderr and fails.
api() {
  local method=$1 path=$2 body=${3:-'{}'} out
  if ! out=$(curl -sS --fail-with-body -X "$method" \
    -H "Authorization: Bearer $CUBBY_API_KEY" -H 'Content-Type: application/json' -H 'Accept: application/json' \
    --data "$body" "$CUBBY_URL$path"); then
    echo "$method $path failed: $out" >&2
    return 1
  fi
  printf '%s' "$out"
}

content_type() {
  case "$1" in
    *.html | *.htm) echo 'text/html' ;;
    *.css) echo 'text/css' ;;
    *.js) echo 'text/javascript' ;;
    *.json) echo 'application/json' ;;
    *.txt | *.md) echo 'text/plain' ;;
    *) echo 'application/octet-stream' ;;
  esac
}

# Descriptors of the given paths (relative to DIR) as {"files": [...]}: one tab-separated line
# per file, turned into JSON by one jq.
describe() {
  local rel abs
  for rel in "$@"; do
    abs="$DIR/$rel"
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$rel" "${rel##*/}" "$(stat -c %s "$abs")" \
      "$(openssl dgst -md5 -binary "$abs" | base64)" "$(sha256sum "$abs" | cut -d' ' -f1)" "$(content_type "$rel")"
  done | jq -Rsc '{files: [split("\n")[] | select(length > 0) | split("\t") |
    {path: .[0], name: .[1], byte_size: (.[2] | tonumber), checksum: .[3], sha256: .[4], content_type: .[5]}]}'
}

mapfile -t FILES < <(cd "$DIR" && find . -type f | sed 's|^\./||' | LC_ALL=C sort)
COUNT=${#FILES[@]}

START=$(api POST "/api/v1/buckets/$BUCKET_ID/upload_sessions" \
  "$(jq -nc --arg key "publish-folder-$$-$(date +%s)" --argjson n "$COUNT" '{client_session_key: $key, expected_file_count: $n, delete_missing: false}')")
SESSION=$(jq -er '.data.bucket_upload_session.id' <<<"$START")
echo "session $SESSION: $COUNT files" >&2

for ((i = 0; i < COUNT; i += BATCH)); do
  REPLY=$(api POST "/api/v1/buckets/$BUCKET_ID/upload_sessions/$SESSION/uploads" "$(describe "${FILES[@]:i:BATCH}")")
  # One line per upload target: path, URL, and the headers to send (joined by \x1f).
  while IFS=$'\t' read -r REL URL HEADERS; do
    ARGS=()
    IFS=$'\x1f' read -r -a LIST <<<"$HEADERS"
    for h in "${LIST[@]}"; do ARGS+=(-H "$h"); done
    # -T: a PUT of the file's bytes, with exactly the returned headers (curl adds no Content-Type).
    curl -sS --fail-with-body -o /dev/null -T "$DIR/$REL" "${ARGS[@]}" "$URL"
  done < <(jq -r '.data.uploads[] | [.path, .upload.url, (.upload.headers | to_entries | map("\(.key): \(.value)") | join("\u001f"))] | @tsv' <<<"$REPLY")
  api POST "/api/v1/buckets/$BUCKET_ID/upload_sessions/$SESSION/finalize_batch" "{\"limit\": $BATCH}" >/dev/null
done

while :; do
  FIN=$(api POST "/api/v1/buckets/$BUCKET_ID/upload_sessions/$SESSION/finalize" '{"complete": true}')
  [ "$(jq -r '.data.finalize_pending' <<<"$FIN")" = false ] && break
  sleep "$POLL_S"
done
echo "stored: $(jq -r '.data.bucket_upload_session.status' <<<"$FIN")" >&2

PUB=$(api POST "/api/v1/buckets/$BUCKET_ID/publication" \
  "$(jq -nc --arg root "$ROOT" '{site_mode: "static", access_mode: "public", metadata: {publication_root_directory: $root, published_by: "publish-folder.sh"}}')")
PUB_ID=$(jq -er '.data.publication.id' <<<"$PUB")

POLLS=0
while :; do
  READ=$(api GET "/api/v1/publications/$PUB_ID")
  STATE=$(jq -r '.data.publication.publish_state' <<<"$READ")
  POLLS=$((POLLS + 1))
  case "$STATE" in
    ready) break ;;
    failed) echo "publish failed: $(jq -c '.data.publication.publish_error' <<<"$READ")" >&2; exit 1 ;;
  esac
  [ "$POLLS" -lt 300 ] || { echo "publication never became ready" >&2; exit 1; }
  sleep "$POLL_S"
done

PUBLIC_URL=$(jq -er '.data.publication.public_url' <<<"$READ")
STATUS=$(curl -sS -o /dev/null -w '%{http_code}' "$PUBLIC_URL/")
case "$STATUS" in 2??) ;; *) echo "site answered $STATUS" >&2; exit 1 ;; esac

jq -nc --arg session "$SESSION" --arg pub "$PUB_ID" --arg url "$PUBLIC_URL" --argjson files "$COUNT" --argjson status "$STATUS" --argjson polls "$POLLS" \
  --arg kind "$(jq -r '.data.publication.kind' <<<"$READ")" --arg root "$(jq -r '.data.publication.publication_root_directory' <<<"$READ")" \
  '{session_id: $session, publication_id: $pub, public_url: $url, files: $files, site_status: $status, polls: $polls, kind: $kind, root: $root}'
