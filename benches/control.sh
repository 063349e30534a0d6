#!/bin/sh
# Control socket benchmark (issue 6): a supervised tree of 100 helpers with 10 children each
# (1,101 processes), its control socket, and:
#  - `foster ctl --json status` and `foster ctl status` wall time (hyperfine; each run is a new
#    process, a connection, the supervisor's snapshot and its rendering), and the supervisor's
#    own CPU time per request (utime + stime over those requests),
#  - the supervisor's voluntary context switches over an idle window while one client follows
#    the event stream (an idle socket must not wake it up).
# Usage: benches/control.sh [IDLE_SECONDS]   (default 10; needs a release build and hyperfine)
set -eu
IDLE=${1:-10}
FOSTER=${FOSTER:-target/release/foster}
DIR=$(mktemp -d)
CFG=$DIR/bench.toml
SOCK=$DIR/bench.sock
: > "$CFG"
i=0
while [ $i -lt 100 ]; do
  cat >> "$CFG" <<EOT
[[helper]]
name = "h$i"
command = ["/bin/sh", "-c", "for j in 1 2 3 4 5 6 7 8 9 10; do sleep 100000 & done; wait"]
stop_grace = "2s"
EOT
  i=$((i+1))
done
# Uncontained: $PID is the supervisor itself (contained, it would be the outer foster, which
# only waits for its init).
$FOSTER run --no-contain --socket "$SOCK" "$CFG" &
PID=$!
trap '$FOSTER ctl --socket "$SOCK" stop >/dev/null 2>&1 || kill $PID; wait $PID 2>/dev/null; rm -rf "$DIR"' EXIT
# Set-up: wait until the whole tree is there (a benchmark may wait; tests may not).
until [ "$($FOSTER ctl --socket "$SOCK" --json status 2>/dev/null | grep -o '"role"' | wc -l)" -ge 1101 ]; do sleep 0.2; done
echo "tree: $($FOSTER ctl --socket "$SOCK" --json status | grep -o '"role"' | wc -l) processes"
echo "status reply: $($FOSTER ctl --socket "$SOCK" --json status | wc -c) bytes"
cpu() { awk '{print $14 + $15}' /proc/$PID/stat; }
T0=$(cpu)
hyperfine -N --warmup 3 --runs 30 \
  "$FOSTER ctl --socket $SOCK --json status" \
  "$FOSTER ctl --socket $SOCK status"
T1=$(cpu)
# 2 commands x (3 warm-up + 30 runs) = 66 requests
echo "supervisor CPU per status request: $(( (T1 - T0) * 1000 / $(getconf CLK_TCK) / 66 )) ms"
$FOSTER ctl --socket "$SOCK" events >/dev/null &
FOLLOW=$!
sleep 1
ctx() { cat /proc/$PID/task/*/status | awk '/^voluntary_ctxt_switches/ {s+=$2} END {print s}'; }
C0=$(ctx)
sleep "$IDLE"
C1=$(ctx)
kill $FOLLOW
echo "voluntary context switches in ${IDLE}s idle, one follower connected: $((C1 - C0))"
echo "resident memory: $(awk '/^VmRSS/ {print $2}' /proc/$PID/status) kB"
