#!/bin/sh
# Supervisor benchmark (issue 5): 100 helpers with 10 grandchildren each, idle.
# Measures foster's CPU time and voluntary context switches (all its threads) over an idle
# window, its resident memory, and the time from a helper's death to its orphans' policy
# signal (from the events log, millisecond timestamps).
# Usage: benches/supervisor_idle.sh [IDLE_SECONDS]   (default 60; needs a release build)
set -eu
IDLE=${1:-60}
FOSTER=${FOSTER:-target/release/foster}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
CFG=$DIR/bench.toml
: > "$CFG"
i=0
while [ $i -lt 100 ]; do
  cat >> "$CFG" <<EOT
[[helper]]
name = "h$i"
command = ["/bin/sh", "-c", "for j in 1 2 3 4 5 6 7 8 9 10; do sleep 100000 & done; wait"]
stop_grace = "2s"
[[helper.generation]]
signal = "TERM"
[[helper.generation]]
signal = "TERM"
grace = "1s"
EOT
  i=$((i+1))
done
# Uncontained: $PID is the supervisor itself and the events log has this namespace's pids
# (contained, $PID would be the outer foster, and the pids those of the tree's namespace).
$FOSTER run --no-contain --events-log "$DIR/events" "$CFG" &
PID=$!
# Set-up: wait until all 1,000 grandchildren exist (a benchmark may wait; tests may not).
while [ "$(pgrep -c -P "$(pgrep -d, -P $PID | tr -d '\n' || echo 0)" sleep 2>/dev/null || echo 0)" -lt 1000 ]; do sleep 0.2; done
sleep 1
ctx() { cat /proc/$PID/task/*/status | awk '/^voluntary_ctxt_switches/ {s+=$2} END {print s}'; }
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
C0=$(ctx); T0=$(cpu)
sleep "$IDLE"
C1=$(ctx); T1=$(cpu)
RSS=$(awk '/^VmRSS/ {print $2}' /proc/$PID/status)
TICK=$(getconf CLK_TCK)
echo "idle ${IDLE}s: voluntary context switches $((C1-C0)), cpu ticks $((T1-T0)) (1 tick = 1/${TICK} s), VmRSS ${RSS} kB"
# Death → policy: kill 10 helpers one at a time; each one's 10 orphans get the TERM policy.
for n in 0 1 2 3 4 5 6 7 8 9; do
  HP=$(grep "\"launch\",\"helper\":\"h$n\"" "$DIR/events" | sed 's/.*"pid":\([0-9]*\).*/\1/')
  kill -KILL "$HP"
  while ! grep -q "\"exit\",\"pid\":$HP," "$DIR/events"; do sleep 0.05; done
done
sleep 1
python3 - "$DIR/events" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
deaths = {}
lat = []
for e in ev:
    if e["event"] == "exit" and e.get("generation") == 1 and e["helper"] in [f"h{n}" for n in range(10)]:
        deaths[e["helper"]] = e["ts_ms"]
    if e["event"] == "signal" and e["reason"] == "orphan_policy" and e["helper"] in deaths:
        lat.append(e["ts_ms"] - deaths[e["helper"]])
first = {}
for e in ev:
    if e["event"] == "signal" and e["reason"] == "orphan_policy" and e["helper"] in deaths:
        first.setdefault(e["helper"], e["ts_ms"] - deaths[e["helper"]])
per = [first.get(f"h{n}") for n in range(10)]
lat.sort()
print(f"death -> orphan policy signal: n={len(lat)} median {lat[len(lat)//2]} ms, max {lat[-1]} ms")
print(f"per death, in kill order (ms to the first orphan's signal): {per}")
PY
kill -TERM $PID
wait $PID || echo "foster exit status $?"
