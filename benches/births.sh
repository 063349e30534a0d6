#!/bin/sh
# Births in the tree (issue 23): adoption through a short-lived parent, and what the kernel's
# process-events connector costs foster.
#   latency: a helper (python) double-forks N times: its child forks the orphan and ends at once;
#            the orphan reports the monotonic time its orphan policy's SIGTERM reached it, the
#            intermediate the time just before its end: adoption-to-policy latency, median and
#            p99, with the connector (after) and without it (before: FOSTER_CONNECTOR=off, with
#            supervisor.rescan = "1s", and with nothing: the orphan is not policed at all);
#   idle:    foster's CPU time and voluntary context switches (all its threads) over a window,
#            beside the machine's forks in that window (/proc/stat's processes);
#   storm:   the same while an unrelated process forks ~RATE times a second, the double fork
#            running in foster's tree all along: its CPU, its wake-ups, and that every orphan of
#            its tree was policed (none missed, foster_tree_events_lost_total).
# Usage: benches/births.sh [N] [WINDOW_SECONDS] [RATE]   (defaults 200 10 2000; root; needs a
# release build and python3)
set -eu
N=${1:-200}
WINDOW=${2:-10}
RATE=${3:-2000}
FOSTER=${FOSTER:-target/release/foster}
DIR=$(mktemp -d)
trap 'kill $(cat "$DIR"/pids 2>/dev/null) 2>/dev/null; rm -rf "$DIR"' EXIT
: > "$DIR/pids"

# The helper: N double forks in a row, PAUSE seconds apart; one line per fork, "LATENCY_NS" or
# "missed" when the orphan's SIGTERM did not come within 5 s.
cat > "$DIR/double.py" <<'EOT'
import os, signal, sys, time, select
n, pause, out = int(sys.argv[1]), float(sys.argv[2]), open(sys.argv[3], "w", buffering=1)
for i in range(n):
    r, w = os.pipe()
    if os.fork() == 0:
        os.setsid()
        ready_r, ready_w = os.pipe()
        if os.fork() == 0:
            def term(*_):
                os.write(w, b"t %d\n" % time.monotonic_ns()); os._exit(0)
            signal.signal(signal.SIGTERM, term)
            os.write(ready_w, b"r"); 
            while True: signal.pause()
        os.read(ready_r, 1)
        os.write(w, b"e %d\n" % time.monotonic_ns())
        os._exit(0)
    os.close(w)
    os.wait()
    got, buf = {}, b""
    deadline = time.monotonic() + 5
    while len(got) < 2 and time.monotonic() < deadline:
        if select.select([r], [], [], max(0, deadline - time.monotonic()))[0]:
            b = os.read(r, 64)
            if not b: break
            buf += b
            for l in buf.split(b"\n")[:-1]:
                k, v = l.split(); got[k.decode()] = int(v)
            buf = buf.split(b"\n")[-1]
    os.close(r)
    out.write("%d\n" % (got["t"] - got["e"]) if len(got) == 2 else "missed\n")
    time.sleep(pause)
os.execvp("sleep", ["sleep", "100000"])
EOT

# storm RATE SECONDS: subshells of dash (a fork and an exit each, nothing exec'd), in batches of
# RATE/20 with a 20 ms pause; prints how many.
storm() {
  dash -c 'end=$(( $(date +%s) + $2 )); b=$(( $1 / 20 )); n=0
    while [ "$(date +%s)" -lt $end ]; do
      i=0; while [ $i -lt $b ]; do ( : ); i=$((i+1)); done
      n=$((n + b)); sleep 0.02
    done; echo $n' sh "$1" "$2"
}

# config N PAUSE OUT [SUPERVISOR]: one helper running the double forks.
config() {
  cat <<EOT
$4
[[helper]]
name = "daemon"
command = ["python3", "$DIR/double.py", "$1", "$2", "$3"]
generation = [{ signal = "TERM" }, { signal = "TERM" }, { signal = "TERM", grace = "10s" }]
EOT
}

# stats FILE: median and p99 of the latencies (ns) in FILE, in ms; and how many were missed.
stats() {
  grep -v missed "$1" | sort -n | awk -v missed="$(grep -c missed "$1" || true)" '
    { v[NR] = $1 }
    END {
      if (NR == 0) { printf "none policed (%d missed)\n", missed; exit }
      m = v[int((NR + 1) / 2)]; p = v[int(NR * 0.99 + 0.999)]
      printf "median %.2f ms, p99 %.2f ms, max %.2f ms over %d (%d missed within 5 s)\n",
        m / 1e6, p / 1e6, v[NR] / 1e6, NR, missed
    }'
}

# run NAME N PAUSE [SUPERVISOR] [ENV]: foster on the double forks until the helper says N lines.
run() {
  out=$DIR/$1.lat
  : > "$out"
  config "$2" "$3" "$out" "${4:-}" > "$DIR/$1.toml"
  env ${5:-} $FOSTER run --no-contain --socket "$DIR/$1.sock" "$DIR/$1.toml" 2>"$DIR/$1.err" &
  echo $! >> "$DIR/pids"
  FPID=$!
  while [ "$(wc -l < "$out")" -lt "$2" ]; do sleep 0.2; done
}

stop() { kill "$FPID"; wait "$FPID" 2>/dev/null || true; }

# cpu PID: utime+stime (ticks) and voluntary switches of every thread.
cpu() {
  t=$(awk '{ print $14 + $15 }' "/proc/$1/stat")
  v=$(cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ { s += $2 } END { print s }')
  echo "$t $v"
}
forks() { awk '/^processes/ { print $2 }' /proc/stat; }

HZ=$(getconf CLK_TCK)
echo "== adoption-to-policy latency, the double fork ($N times, --no-contain)"
run after "$N" 0.01
stop
echo "after (connector):                    $(stats "$DIR/after.lat")"
run rescan 20 0.05 '[supervisor]
rescan = "1s"' FOSTER_CONNECTOR=off
stop
echo "before, supervisor.rescan = \"1s\":     $(stats "$DIR/rescan.lat")"
run before 2 0 "" FOSTER_CONNECTOR=off
stop
echo "before (nothing):                     $(stats "$DIR/before.lat")"

# births MODE FLAG: foster's CPU (the supervisor's: contained, its init) while its helper forks
# 2,000 subshells in its tree, each birth read into the tree and each end announced.
births() {
  mkfifo "$DIR/gate-$1"
  cat > "$DIR/births-$1.toml" <<EOT
[[helper]]
name = "forker"
command = ["dash", "-c", "read x < $DIR/gate-$1; i=0; while [ \$i -lt 2000 ]; do ( : ); i=\$((i+1)); done; touch $DIR/done-$1; exec sleep 100000"]
EOT
  $FOSTER run $2 --socket "$DIR/b-$1.sock" "$DIR/births-$1.toml" 2>/dev/null &
  FPID=$!
  echo $FPID >> "$DIR/pids"
  until $FOSTER ctl --socket "$DIR/b-$1.sock" status >/dev/null 2>&1; do sleep 0.1; done
  sup=$FPID
  [ "$1" = contained ] && sup=$(awk '{ print $1 }' /proc/"$FPID"/task/"$FPID"/children)
  c0=$(cpu "$sup")
  echo go > "$DIR/gate-$1"
  while [ ! -e "$DIR/done-$1" ]; do sleep 0.1; done
  c1=$(cpu "$sup")
  echo "$1: $(( (${c1% *} - ${c0% *}) * 1000 / HZ )) ms of CPU for 2,000 births and ends in the tree"
  stop
}
echo "== births in the tree: the cost of each, contained (translated) and not"
births uncontained --no-contain
births contained ""

echo "== idle: foster with its helper asleep, ${WINDOW}s"
run idle 1 0
set -- $(cpu "$FPID"); f0=$(forks)
sleep "$WINDOW"
set -- $(cpu "$FPID") "$@"; f1=$(forks)
echo "CPU $(( ($1 - $3) * 1000 / HZ )) ms, $(( $2 - $4 )) voluntary switches, while the machine forked $(( f1 - f0 )) times"
stop

echo "== storm: an unrelated process forks ~$RATE/s for ${WINDOW}s; the double fork runs in the tree"
: > "$DIR/storm.lat"
config 100000 0.1 "$DIR/storm.lat" "" > "$DIR/storm.toml"
$FOSTER run --no-contain --socket "$DIR/storm.sock" "$DIR/storm.toml" 2>"$DIR/storm.err" &
FPID=$!
echo $FPID >> "$DIR/pids"
while [ ! -s "$DIR/storm.lat" ]; do sleep 0.1; done
set -- $(cpu "$FPID"); f0=$(forks)
done=$(storm "$RATE" "$WINDOW")
set -- $(cpu "$FPID") "$@"; f1=$(forks)
echo "storm: $done forks in the storm ($(( f1 - f0 )) on the machine); foster CPU $(( ($1 - $3) * 1000 / HZ )) ms ($(( ($1 - $3) * 100000 / HZ / WINDOW / 1000 )).$(( ($1 - $3) * 100000 / HZ / WINDOW % 1000 / 100 ))% of a core), $(( $2 - $4 )) voluntary switches"
echo "its tree meanwhile: $(stats "$DIR/storm.lat")"
echo "lost announcements: $($FOSTER ctl --socket "$DIR/storm.sock" metrics | awk '/^foster_tree_events_lost_total/ { print $2 }')"
stop
