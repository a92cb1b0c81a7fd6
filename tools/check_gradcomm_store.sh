#!/usr/bin/env bash
# Usage: check_gradcomm_store.sh GRADCOMM_STORE — gradcomm-store's command line: --help,
# refusals (exit 2, the usage on stderr, nothing on stdout), a port already taken (exit
# 1 naming it), the port written to --port-file and printed, and a clean stop on SIGTERM
# and SIGINT (exit 0, saying which).
set -uo pipefail
store=$1
fail() { echo "FAIL: $*"; exit 1; }
has() { grep -qF -- "$2" <<< "$1" || fail "$3: no '$2' in: $1"; }
dir=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$dir"' EXIT

for h in --help -h; do
  out=$("$store" $h) || fail "$h exited $?"
  has "$out" "Usage: gradcomm-store [--host HOST] [--port PORT] [--port-file FILE] [--quiet]" "$h"
done
for bad in --bogus "extra" "--port 70000" "--port x" "--port -1"; do
  out=$("$store" $bad 2> "$dir/err"); rc=$?
  [ $rc -eq 2 ] || fail "'$bad' exited $rc, not 2"
  [ -z "$out" ] || fail "'$bad' wrote to stdout: $out"
  [ -s "$dir/err" ] || fail "'$bad' said nothing on stderr"
done
has "$("$store" --port 70000 2>&1)" "--port 70000 is not 0..65535" "--port 70000"

for sig in TERM INT; do
  rm -f "$dir/port"
  "$store" --host 127.0.0.1 --port 0 --port-file "$dir/port" > "$dir/out" 2> "$dir/log" &
  pid=$!
  for _ in $(seq 200); do [ -s "$dir/port" ] && break; sleep 0.02; done
  port=$(cat "$dir/port") || fail "no --port-file written"
  [[ "$port" =~ ^[0-9]+$ ]] && ((port > 0)) || fail "--port-file holds '$port'"
  sleep 0.1
  has "$(cat "$dir/out")" "gradcomm-store listening on 127.0.0.1:$port" "the printed address"
  # The port is taken while it runs: a second store says so and exits 1.
  out=$("$store" --host 127.0.0.1 --port "$port" 2>&1); rc=$?
  [ $rc -eq 1 ] || fail "a second store on port $port exited $rc, not 1: $out"
  has "$out" "gradcomm-store cannot listen on port $port: Address already in use (another gradcomm-store" \
    "the second store's refusal"
  has "$out" "choose another --port" "the second store's refusal"
  kill -$sig $pid
  wait $pid; rc=$?
  [ $rc -eq 0 ] || fail "SIG$sig: exit $rc, not 0"
  has "$(cat "$dir/log")" "gradcomm-store: SIG$sig received, stopping" "SIG$sig"
done
echo "gradcomm-store: options, refusals, --port-file and SIGTERM/SIGINT ok"
