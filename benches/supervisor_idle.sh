#!/bin/sh
# Supervisor benchmark (issues 5 and 12): 100 helpers with 10 grandchildren each, idle, plus 10
# helpers whose child has 10 children of its own (the deep case).
# Measures foster's CPU time and voluntary context switches (all its threads) over an idle
# window, its resident memory, and the time from a death to the orphan policy's signal of the
# orphans it leaves (from the events log, millisecond timestamps):
#   direct: a helper killed; foster reaps it (SIGCHLD) and adopts its 10 sleeps;
#   deep: a helper's child killed; its 10 sleeps go to foster with no SIGCHLD to foster, which
#         hears of it from the pidfd it holds for that child.
# Usage: benches/supervisor_idle.sh [IDLE_SECONDS]   (default 60; needs a release build)
set -eu
IDLE=${1:-60}
FOSTER=${FOSTER:-target/release/foster}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
CFG=$DIR/bench.toml
: > "$CFG"
# helpers PREFIX COUNT COMMAND: COUNT helpers PREFIX0.. running COMMAND (a TOML string), their
# children's generation with a 1s grace.
helpers() {
  i=0
  while [ $i -lt "$2" ]; do
    cat >> "$CFG" <<EOT
[[helper]]
name = "$1$i"
command = ["/bin/sh", "-c", $3]
stop_grace = "2s"
[[helper.generation]]
signal = "TERM"
[[helper.generation]]
signal = "TERM"
grace = "1s"
EOT
    i=$((i+1))
  done
}
helpers h 100 '"for j in 1 2 3 4 5 6 7 8 9 10; do sleep 100000 & done; wait"'
# The deep case: helper → a middle shell → 10 sleeps. The helper execs once the middle shell has
# ended (no end of its own, so no SIGCHLD reaches foster).
helpers d 10 "\"/bin/sh -c 'for j in 1 2 3 4 5 6 7 8 9 10; do sleep 100000 & done; wait' & wait; exec sleep 100000\""
# Uncontained: $PID is the supervisor itself and the events log has this namespace's pids
# (contained, $PID would be the outer foster, and the pids those of the tree's namespace).
$FOSTER run --no-contain --no-socket --events-log "$DIR/events" "$CFG" &
PID=$!
now_ms() { date +%s%3N; }
# The sleeps below foster (descendants by parent pid).
sleeps() {
  ps -e -o pid=,ppid=,comm= | awk -v root="$PID" '
    { parent[$1] = $2; comm[$1] = $3 }
    END {
      n = 0
      for (p in parent) {
        if (comm[p] != "sleep") continue
        q = parent[p]
        while (q != "" && q != root && q > 1) q = parent[q]
        if (q == root) n++
      }
      print n
    }'
}
# Set-up: wait until all 1,100 sleeps exist (a benchmark may wait; tests may not).
while [ "$(sleeps)" -lt 1100 ]; do sleep 0.2; done
sleep 1
ctx() { cat /proc/$PID/task/*/status | awk '/^voluntary_ctxt_switches/ {s+=$2} END {print s}'; }
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
C0=$(ctx); T0=$(cpu)
sleep "$IDLE"
C1=$(ctx); T1=$(cpu)
RSS=$(awk '/^VmRSS/ {print $2}' /proc/$PID/status)
TICK=$(getconf CLK_TCK)
echo "idle ${IDLE}s: voluntary context switches $((C1-C0)), cpu ticks $((T1-T0)) (1 tick = 1/${TICK} s), VmRSS ${RSS} kB"
: > "$DIR/kills"
# Direct: kill 10 helpers one at a time; each one's 10 orphans get the TERM policy.
for n in 0 1 2 3 4 5 6 7 8 9; do
  HP=$(grep "\"launch\",\"helper\":\"h$n\"" "$DIR/events" | sed 's/.*"pid":\([0-9]*\).*/\1/')
  echo "h$n $(now_ms)" >> "$DIR/kills"
  kill -KILL "$HP"
  while ! grep -q "\"exit\",\"pid\":$HP," "$DIR/events"; do sleep 0.05; done
done
# Deep: kill each deep helper's middle shell (the helper's child with children).
for n in 0 1 2 3 4 5 6 7 8 9; do
  HP=$(grep "\"launch\",\"helper\":\"d$n\"" "$DIR/events" | sed 's/.*"pid":\([0-9]*\).*/\1/')
  MID=$(pgrep -P "$HP" -x sh)
  echo "d$n $(now_ms)" >> "$DIR/kills"
  kill -KILL "$MID"
  while [ "$(grep -c "\"signal\",\"target\".*\"helper\":\"d$n\",.*orphan_policy" "$DIR/events")" -lt 10 ]; do sleep 0.05; done
done
sleep 1
python3 - "$DIR/events" "$DIR/kills" <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
killed = {h: int(t) for h, t in (l.split() for l in open(sys.argv[2]))}
def stats(lat):
    lat = sorted(lat)
    return f"n={len(lat)} median {lat[len(lat)//2]} ms, max {lat[-1]} ms"
# Direct, as measured since issue 5: from foster's exit event of the helper.
deaths = {}
direct = []
for e in ev:
    if e["event"] == "exit" and e.get("generation") == 1 and e["helper"] in killed:
        deaths[e["helper"]] = e["ts_ms"]
    if e["event"] == "signal" and e["reason"] == "orphan_policy" and e["helper"] in deaths:
        direct.append(e["ts_ms"] - deaths[e["helper"]])
print(f"direct, helper's exit event -> orphan policy signal: {stats(direct)}")
# Both cases from the kill (the death itself: the deep case has no event of foster's for it).
for case in ("h", "d"):
    lat, first = [], {}
    for e in ev:
        h = e.get("helper") or ""
        if e["event"] == "signal" and e["reason"] == "orphan_policy" and h.startswith(case) and h in killed:
            lat.append(e["ts_ms"] - killed[h])
            first.setdefault(h, e["ts_ms"] - killed[h])
    name = "direct (helper killed)" if case == "h" else "deep (helper's child killed, no SIGCHLD)"
    print(f"{name}, kill -> orphan policy signal: {stats(lat)}")
    print(f"  per death, in kill order (ms to the first orphan's signal): {[first.get(f'{case}{n}') for n in range(10)]}")
PY
kill -TERM $PID
wait $PID || echo "foster exit status $?"
