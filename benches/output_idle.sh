#!/bin/sh
# Output benchmark (issue 13), idle: what captured helpers that print nothing cost foster.
# 10 helpers, each captured (relayed to a pipe, and a log file of its own), print one line then
# sleep; once foster has relayed all ten lines, foster's voluntary context switches are read
# per thread (/proc/PID/task/*/status) before and after an idle window, with its CPU time.
# Expected: 0 wake-ups (the output thread waits in epoll_wait without a timeout, the relay
# thread in a channel's receive, the supervisor's loop with no timer armed).
# Usage: benches/output_idle.sh [IDLE_SECONDS]   (default 10; needs a release build)
set -eu
IDLE=${1:-10}
FOSTER=${FOSTER:-target/release/foster}
DIR=$(mktemp -d)
PID=
trap '[ -n "$PID" ] && kill -TERM $PID 2>/dev/null; wait 2>/dev/null; rm -rf "$DIR"' EXIT
CFG=$DIR/idle.toml
: > "$CFG"
i=0
while [ $i -lt 10 ]; do
  cat >> "$CFG" <<EOT
[[helper]]
name = "h$i"
command = ["/bin/sh", "-c", "echo ready; exec sleep 100000"]
log = { file = "$DIR/h$i.log" }
EOT
  i=$((i+1))
done
# Relayed to a pipe (read by cat into a file), so that the relay thread exists. Uncontained:
# $PID is the supervisor itself.
mkfifo "$DIR/pipe"
cat < "$DIR/pipe" > "$DIR/out" &
$FOSTER run --no-contain --no-socket "$CFG" > "$DIR/pipe" 2> "$DIR/err" &
PID=$!
# Set-up: every helper's line relayed (a benchmark may poll; tests may not).
while [ "$(grep -c ready "$DIR/out" || true)" -lt 10 ]; do sleep 0.1; done
sleep 1
threads() {
  for t in /proc/$PID/task/*; do
    printf '%s %s\n' "$(cat "$t/comm")" "$(awk '/^voluntary_ctxt_switches/ {print $2}' "$t/status")"
  done | sort
}
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
threads > "$DIR/before"; T0=$(cpu)
sleep "$IDLE"
threads > "$DIR/after"; T1=$(cpu)
echo "idle ${IDLE}s, 10 captured helpers: foster's threads, voluntary context switches during the window:"
join "$DIR/before" "$DIR/after" | awk '{ d = $3 - $2; total += d; printf "  %-16s %d\n", $1, d } END { printf "  %-16s %d\n", "total", total }'
echo "  cpu ticks: $((T1-T0)) (1 tick = 1/$(getconf CLK_TCK) s); VmRSS $(awk '/^VmRSS/ {print $2}' /proc/$PID/status) kB"
