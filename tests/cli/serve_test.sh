#!/usr/bin/env bash
# The happy path of the real `berth serve` binary (SPEC 1, 2):
#   1. `berth serve` on the demo cluster prints where it listens and one curl to try; the curl
#      works; /readyz answers; a second berth on the same port fails clearly.
#   2. SIGTERM stops it promptly with exit status 0, also while a client holds an idle
#      kept-alive connection (as kube-scheduler does).
#   5. HTTPS: with --tls-cert-file/--tls-key-file both ports speak TLS only; a certificate
#      replaced in place (key and certificate) is served to the next connection without a
#      restart. Needs the openssl command (Debian's ca-certificates depends on it).
#   4. Decisions in JSON logs and /metrics; `--journal` records the run and `berth replay`
#      replays it with no difference.
#   3. Round trip: /debug/snapshot of a changed model loads back with --cluster into a second
#      berth whose /debug/snapshot is byte-for-byte the same (but for the List's resourceVersion,
#      a change counter).
# Usage: serve_test.sh PATH/TO/berth. Needs bash and curl; only uses 127.0.0.1.
set -u

BERTH=${1:?usage: serve_test.sh PATH/TO/berth}
command -v curl >/dev/null || { echo "SKIP: curl is not installed"; exit 77; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/berth-serve-test.XXXXXX")
PIDS=()
cleanup() {
  exec 3>&-
  for pid in "${PIDS[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
  echo "FAIL: $*"
  for f in "$WORK"/*.out "$WORK"/*.err; do
    [ -s "$f" ] && { echo "--- $f"; head -c 4000 "$f"; }
  done
  exit 1
}

CURL=(curl -s --max-time 5)

# start_berth NAME ARGS...: starts `berth serve` on a free port (trying random ones) and waits
# until it prints its listen line. An argument @OPS@ becomes 127.0.0.1:OPS_PORT, the port after
# PORT, so that a taken operations port is retried like a taken PORT. Sets PORT, OPS_PORT and
# PID; output in $WORK/NAME.out and NAME.err.
start_berth() {
  local name=$1
  shift
  local attempt i
  for attempt in $(seq 1 20); do
    PORT=$((20000 + RANDOM % 40000))
    OPS_PORT=$((PORT + 1))
    local args=()
    for a in "$@"; do
      if [ "$a" = "@OPS@" ]; then args+=("127.0.0.1:$OPS_PORT"); else args+=("$a"); fi
    done
    "$BERTH" serve --listen "127.0.0.1:$PORT" "${args[@]}" >"$WORK/$name.out" 2>"$WORK/$name.err" &
    PID=$!
    PIDS+=("$PID")
    for i in $(seq 1 100); do  # up to 10 s
      grep -q "listening on" "$WORK/$name.out" 2>/dev/null && return 0
      kill -0 "$PID" 2>/dev/null || break
      sleep 0.1
    done
    if kill -0 "$PID" 2>/dev/null; then
      fail "$name: no listen line within 10 s"
    fi
    wait "$PID" 2>/dev/null
    grep -q "cannot listen" "$WORK/$name.err" || fail "$name: berth serve exited before listening"
  done
  fail "$name: no free port found in 20 attempts"
}

# stop_berth PID: SIGTERM, then requires an exit within 5 s with status 0.
stop_berth() {
  local pid=$1 i rc
  kill -TERM "$pid" || fail "cannot signal berth $pid"
  for i in $(seq 1 50); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$pid" 2>/dev/null && fail "berth $pid still running 5 s after SIGTERM"
  wait "$pid"
  rc=$?
  [ "$rc" -eq 0 ] || fail "berth $pid exited with status $rc after SIGTERM, expected 0"
}

# ---- 1. demo cluster: listen line, the suggested curl, /readyz ------------------------------------
start_berth demo
DEMO_PID=$PID
DEMO_PORT=$PORT
URL="http://127.0.0.1:$DEMO_PORT"

grep -q "listening on $URL" "$WORK/demo.out" || fail "the listen line does not name $URL"
grep -q "demo cluster" "$WORK/demo.out" || fail "the listen line does not say it runs the demo cluster"
TRY=$(grep -m1 -o "curl .*" "$WORK/demo.out") || fail "no curl to try in the output"
[ "$(grep -c "curl " "$WORK/demo.out")" -eq 1 ] || fail "expected exactly one curl line"
case "$TRY" in *"127.0.0.1:$DEMO_PORT"*) ;; *) fail "the suggested curl does not use port $DEMO_PORT: $TRY" ;; esac
bash -c "$TRY" >"$WORK/try.txt" 2>&1 || fail "the suggested curl failed: $TRY"
grep -q "NODE" "$WORK/try.txt" || fail "the suggested curl printed no node table"

READY=$("${CURL[@]}" -w ' %{http_code}' "$URL/readyz") || fail "GET /readyz failed"
case "$READY" in *'"ready":true'*' 200') ;; *) fail "GET /readyz answered: $READY" ;; esac
"${CURL[@]}" -f "$URL/healthz" >/dev/null || fail "GET /healthz failed"

# A second berth on the same port must not start (no silent SO_REUSEPORT sharing).
"$BERTH" serve --listen "127.0.0.1:$DEMO_PORT" >"$WORK/dup.out" 2>"$WORK/dup.err" &
DUP_PID=$!
PIDS+=("$DUP_PID")
for i in $(seq 1 50); do
  kill -0 "$DUP_PID" 2>/dev/null || break
  sleep 0.1
done
kill -0 "$DUP_PID" 2>/dev/null && fail "a second berth on port $DEMO_PORT is running"
wait "$DUP_PID" && fail "a second berth on port $DEMO_PORT exited with status 0"
grep -q "cannot listen on 127.0.0.1:$DEMO_PORT" "$WORK/dup.err" || fail "no clear error for a port in use"
[ "$(grep -c . "$WORK/dup.err")" -eq 1 ] || fail "expected one line for a port in use"

# Change the model before taking the snapshot, so the round trip carries a bind.
POD='{"type": "ADDED", "object": {"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": "round-trip", "namespace": "default", "uid": "uid-round-trip"},
  "spec": {"schedulerName": "berth-scheduler",
           "containers": [{"name": "main", "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]},
  "status": {"phase": "Pending"}}}'
"${CURL[@]}" -f -H 'Content-Type: application/json' -d "$POD" "$URL/v1/events" >/dev/null ||
  fail "POST /v1/events failed"
NODE=$("${CURL[@]}" "$URL/debug/snapshot" | grep -m1 -o '"name": "[^"]*"' | cut -d'"' -f4)
[ -n "$NODE" ] || fail "no node in the snapshot"
BIND=$("${CURL[@]}" -H 'Content-Type: application/json' \
  -d "{\"PodName\": \"round-trip\", \"PodNamespace\": \"default\", \"PodUID\": \"uid-round-trip\", \"Node\": \"$NODE\"}" \
  "$URL/bind") || fail "POST /bind failed"
[ "$BIND" = '{"Error":""}' ] || fail "bind of round-trip to $NODE answered: $BIND"

"${CURL[@]}" -f "$URL/debug/snapshot" >"$WORK/snapshot1.json" || fail "GET /debug/snapshot failed"
grep -q '"round-trip"' "$WORK/snapshot1.json" || fail "the snapshot lacks the pod added over HTTP"

# ---- 2. SIGTERM with an idle kept-alive connection open ------------------------------------------
exec 3<>"/dev/tcp/127.0.0.1/$DEMO_PORT" || fail "cannot open a raw connection"
printf 'GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' >&3
read -r -t 5 STATUS <&3 || fail "no reply on the raw connection"
case "$STATUS" in "HTTP/1.1 200"*) ;; *) fail "GET /healthz on the raw connection: $STATUS" ;; esac
stop_berth "$DEMO_PID"  # the connection on fd 3 is still open and idle
exec 3>&-
grep -q "Traceback\|terminate called\|Aborted" "$WORK/demo.err" && fail "crash output on shutdown"

# ---- 3. round trip through --cluster --------------------------------------------------------------
start_berth replay --cluster "$WORK/snapshot1.json"
REPLAY_PID=$PID
grep -q "snapshot1.json" "$WORK/replay.out" || fail "the listen line does not name the --cluster file"
"${CURL[@]}" -f "http://127.0.0.1:$PORT/debug/snapshot" >"$WORK/snapshot2.json" ||
  fail "GET /debug/snapshot from the replay failed"
# Everything but the List's own metadata.resourceVersion, the model's change counter: the replay
# reached the same state in fewer changes (the original also counted the event and the bind).
for n in 1 2; do
  grep -Eq '^    "resourceVersion": "[0-9]+"$' "$WORK/snapshot$n.json" ||
    fail "snapshot$n.json has no List resourceVersion where expected"
  grep -Ev '^    "resourceVersion": "[0-9]+"$' "$WORK/snapshot$n.json" >"$WORK/snapshot$n.cmp"
done
if ! cmp -s "$WORK/snapshot1.cmp" "$WORK/snapshot2.cmp"; then
  diff "$WORK/snapshot1.cmp" "$WORK/snapshot2.cmp" | head -40
  fail "the snapshot loaded back with --cluster differs from the original"
fi
stop_berth "$REPLAY_PID"

# ---- 4. decisions in JSON logs, and /metrics; the decision journal ---------------------------------
start_berth logs --log-level debug --log-format json --journal "$WORK/journal"
LOGS_PID=$PID
FILTER='{"Pod": {"metadata": {"name": "eval-pending", "namespace": "ml", "uid": "eval-pending",
  "labels": {"berth.io/queue": "research"}}, "spec": {"schedulerName": "berth-scheduler",
  "containers": [{"name": "main", "resources": {"requests": {"cpu": "8", "memory": "64Gi", "nvidia.com/gpu": "2"}}}]}},
  "NodeNames": ["cpu-1", "gpu-small-2"]}'
"${CURL[@]}" -f -H 'Content-Type: application/json' -d "$FILTER" "http://127.0.0.1:$PORT/filter" >/dev/null ||
  fail "POST /filter failed"
METRICS=$("${CURL[@]}" -f "http://127.0.0.1:$PORT/metrics") || fail "GET /metrics failed"
grep -qx 'berth_requests_total{verb="filter"} 1' <<<"$METRICS" || fail "/metrics does not count the filter"
grep -qx '# TYPE berth_request_duration_seconds histogram' <<<"$METRICS" || fail "/metrics lacks the latency histogram"
stop_berth "$LOGS_PID"
# Every line on stderr is one JSON object; the filter's decision is one of them, at debug level.
[ -s "$WORK/logs.err" ] || fail "no log lines"
grep -Evq '^\{.*\}$' "$WORK/logs.err" && fail "a log line is not one JSON object"
grep -E '"level":"debug"' "$WORK/logs.err" | grep -q 'filter pod=ml/eval-pending candidates=2 fit=1 rejected=' ||
  fail "no debug line for the filter decision"
# The journal of that run replays through the same binary with no difference.
"$BERTH" replay --journal "$WORK/journal" >"$WORK/replay-journal.out" 2>&1 ||
  fail "berth replay of the serve journal: exit $? ($(cat "$WORK/replay-journal.out"))"
grep -q "(1 verb calls, " "$WORK/replay-journal.out" || fail "the journal lacks the filter: $(cat "$WORK/replay-journal.out")"
grep -q "decisions compared: 0 differ" "$WORK/replay-journal.out" || fail "the replay differs: $(cat "$WORK/replay-journal.out")"

# ---- 5. HTTPS on both ports, and a certificate replaced in place -----------------------------------
if command -v openssl >/dev/null; then
  mkcert() {  # mkcert NAME: a self-signed certificate for 127.0.0.1 in $WORK/NAME.{crt,key}
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
      -subj "/CN=$1" -addext "subjectAltName=IP:127.0.0.1" \
      -keyout "$WORK/$1.key" -out "$WORK/$1.crt" 2>/dev/null || fail "openssl cannot make $1"
  }
  mkcert first
  mkcert second
  mkdir -p "$WORK/tls"
  cp "$WORK/first.crt" "$WORK/tls/tls.crt"
  cp "$WORK/first.key" "$WORK/tls/tls.key"
  start_berth https --tls-cert-file "$WORK/tls/tls.crt" --tls-key-file "$WORK/tls/tls.key" \
    --ops-listen @OPS@
  HTTPS_PID=$PID
  grep -q "listening on https://127.0.0.1:$PORT" "$WORK/https.out" || fail "the listen line does not say https"
  "${CURL[@]}" -f --cacert "$WORK/first.crt" "https://127.0.0.1:$PORT/healthz" >/dev/null ||
    fail "GET /healthz over HTTPS failed"
  "${CURL[@]}" -f --cacert "$WORK/first.crt" "https://127.0.0.1:$OPS_PORT/readyz" >/dev/null ||
    fail "GET /readyz over HTTPS on the operations port failed"
  "${CURL[@]}" -f -H 'Content-Type: application/json' -d "$FILTER" --cacert "$WORK/first.crt" \
    "https://127.0.0.1:$PORT/filter" | grep -q '"NodeNames"' || fail "POST /filter over HTTPS failed"
  "${CURL[@]}" "http://127.0.0.1:$PORT/healthz" >/dev/null && fail "plain HTTP was answered on the HTTPS port"
  # Replace the pair in place, key first, as cert-manager and Secret volumes do (one rename each).
  cp "$WORK/second.key" "$WORK/tls/tls.key.new" && mv "$WORK/tls/tls.key.new" "$WORK/tls/tls.key"
  cp "$WORK/second.crt" "$WORK/tls/tls.crt.new" && mv "$WORK/tls/tls.crt.new" "$WORK/tls/tls.crt"
  ok=0
  for i in $(seq 1 40); do  # berth looks at the files at most once a second
    if "${CURL[@]}" -f --cacert "$WORK/second.crt" "https://127.0.0.1:$PORT/healthz" >/dev/null; then
      ok=1
      break
    fi
    sleep 0.1
  done
  [ "$ok" = 1 ] || fail "the replaced certificate was not served within 4 s"
  "${CURL[@]}" -f --cacert "$WORK/first.crt" "https://127.0.0.1:$PORT/healthz" >/dev/null &&
    fail "the old certificate is still served after the reload"
  "${CURL[@]}" -f --cacert "$WORK/second.crt" "https://127.0.0.1:$OPS_PORT/metrics" |
    grep -q '^berth_tls_certificate_reloads_total{result="ok"} 1$' || fail "/metrics does not count the reload"
  stop_berth "$HTTPS_PID"
  grep -q "certificate reloaded" "$WORK/https.err" || fail "the reload is not logged"
else
  echo "note: openssl is not installed; the HTTPS part is skipped"
fi

echo "PASS: serve on port $DEMO_PORT, SIGTERM exit 0, snapshot round trip identical ($(wc -c <"$WORK/snapshot1.json") bytes), JSON decision logs, /metrics, HTTPS with a certificate reload"
exit 0
