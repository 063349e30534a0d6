#!/bin/sh
# Scale benchmark (issues 14 and 28): foster run, s6-svscan and supervisord side by side, one
# after the other, in one run:
#   plain   1,000 helpers, each `sleep` (s6: one service each; supervisord: one program each);
#           foster in its default mode (contained, its lines on standard error, kept in a file)
#           and with `-q --no-contain` beside it; the four interleaved, ROUNDS times (default
#           3), then the median of each (s6's scan directory is ready before s6-svscan starts,
#           as its users set it up);
#   chain   100 helpers, each launched once the previous one is ready: foster by depends_on
#           { prev = "ready" } with ready = { notify = true } and `systemd-notify --ready`; s6 by
#           its notification-fd (3) and, in each run script, `s6-svwait -U` on the previous
#           service; supervisord has no readiness: plain start order by priority; foster also
#           with s6's protocol (ready = { fd = 3 }, the helper writing a newline as s6's do);
#   health  foster alone (the others have no health checks): the 1,000 helpers of plain, 100 of
#           them with a tcp health check and 10 with an exec one (/bin/true), every 5 s, against
#           one more helper listening on a loopback port.
# For each: the time from the supervisor's start until every helper runs (plain, health: all
# the sleeps exist) or is ready (chain: foster's `ready` event of the last helper, s6-svwait -U on
# the last service; supervisord: all the sleeps exist); the RSS and PSS summed over the
# supervisor's own processes (foster; s6-svscan and every s6-supervise; supervisord) from
# /proc/PID/smaps_rollup; over an idle window, their CPU (utime+stime, with their reaped
# children's: an exec check's probes count) and wake-ups (voluntary and involuntary context
# switches of all their threads, /proc/PID/task/*/status, as benches/supervisor_idle.sh reads
# them); then the time from the stop request (SIGTERM; s6-svscanctl -t) until the supervisor
# has exited and no helper is left.
# Usage: benches/scale.sh [IDLE_SECONDS]   (default 60; needs a release build; needs
# systemd-notify, s6-svscan and supervisord: Debian packages systemd, s6, supervisor)
set -eu
IDLE=${1:-60}
N=${N:-1000}
ROUNDS=${ROUNDS:-3}
CHAIN=${CHAIN:-100}
# ONLY: a pattern of the cases to run (e.g. 'chain*'); all by default.
ONLY=${ONLY:-*}
FOSTER=${FOSTER:-$(pwd)/target/release/foster}
# FOSTER_BEFORE: another build of foster, measured in its default mode in each round beside
# FOSTER (a change's before and after, interleaved); none by default.
FOSTER_BEFORE=${FOSTER_BEFORE:-}
for tool in systemd-notify s6-svscan s6-svwait supervisord python3; do
  command -v $tool >/dev/null || { echo "scale.sh: $tool is not installed" >&2; exit 2; }
done
DIR=$(mktemp -d)
# The helpers' sleep, unique to this run: what counts them, and what finds any left behind.
MARK=$((1000000 + $$))
SLEEP="/bin/sleep $MARK"
PORT=$((20000 + $$ % 10000))
TICK=$(getconf CLK_TCK)
PID= STOP=
cleanup() {
  if [ -n "$STOP" ]; then eval "$STOP" >/dev/null 2>&1 || true; fi
  if [ -n "$PID" ]; then wait "$PID" 2>/dev/null || true; fi
  STOP= PID=
}
trap 'cleanup; rm -rf "$DIR"' EXIT
trap 'exit 1' INT TERM

now_ms() { date +%s%3N; }
running() { pgrep -c -x -f "$SLEEP" || true; }
# The supervisor's own processes: foster or supervisord, or s6-svscan and its s6-supervise.
procs() {
  echo "$PID"
  [ "$KIND" != s6 ] || pgrep -P "$PID" -x s6-supervise || true
  # Contained, the supervising foster is the outer one's child (PID 1 of the namespace).
  [ "$KIND" != foster ] || pgrep -P "$PID" -x foster || true
}
sum_status() {
  for p in $(procs); do cat /proc/$p/task/*/status 2>/dev/null; done |
    awk '/^(voluntary|nonvoluntary)_ctxt_switches/ { s += $2 } END { print s + 0 }'
}
sum_cpu() {
  for p in $(procs); do cat /proc/$p/stat 2>/dev/null; done |
    awk '{ s += $14 + $15 + $16 + $17 } END { print s + 0 }'
}
sum_mem() {
  for p in $(procs); do cat /proc/$p/smaps_rollup 2>/dev/null; done |
    awk '/^Rss:/ { r += $2 } /^Pss:/ { p += $2 } END { printf "%.1f MB %.1f MB", r / 1024, p / 1024 }'
}
# each COUNT FUNCTION: FUNCTION 0 .. FUNCTION COUNT-1 (the one loop of every config below).
each() {
  i=0
  while [ $i -lt "$1" ]; do "$2" $i; i=$((i + 1)); done
}

# --- foster ---
foster_plain() {
  printf '[[helper]]\nname = "h%s"\ncommand = ["/bin/sleep", "%s"]\n' "$1" "$MARK"
}
foster_chain() {
  printf '[[helper]]\nname = "h%s"\n' "$1"
  printf 'command = ["/bin/sh", "-c", "systemd-notify --ready; exec %s"]\n' "$SLEEP"
  printf 'ready = { notify = true }\n'
  [ "$1" -eq 0 ] || printf 'depends_on = { h%s = "ready" }\n' $(($1 - 1))
}
# The same chain with s6's protocol (a newline on descriptor 3), the helper s6's does.
foster_chainfd() {
  printf '[[helper]]\nname = "h%s"\n' "$1"
  printf 'command = ["/bin/sh", "-c", "echo >&3; exec %s"]\n' "$SLEEP"
  printf 'ready = { fd = 3 }\n'
  [ "$1" -eq 0 ] || printf 'depends_on = { h%s = "ready" }\n' $(($1 - 1))
}
foster_health() {
  foster_plain "$1"
  if [ "$1" -lt 100 ]; then
    printf 'health = { tcp = "127.0.0.1:%s", interval = "5s", timeout = "2s" }\n' "$PORT"
  elif [ "$1" -lt 110 ]; then
    printf 'health = { exec = ["/bin/true"], interval = "5s", timeout = "2s" }\n'
  fi
}
listener() {
  printf '[[helper]]\nname = "listener"\noutput = "null"\n'
  printf 'command = ["python3", "-c", "import socket,time\\ns=socket.create_server((\\"127.0.0.1\\", %s))\\nwhile True: s.accept()[0].close()"]\n' "$PORT"
}
# FOSTER_ARGS: how foster runs; empty is its default mode (contained, lines on stderr).
FOSTER_ARGS="-q --no-contain"
start_foster() { # MODE COUNT
  CFG=$DIR/foster.toml
  { [ "$1" != health ] || listener; each "$2" foster_$1; } > "$CFG"
  rm -f "$DIR/events"
  KIND=foster
  T0=$(now_ms)
  # shellcheck disable=SC2086 # the arguments split on purpose
  "$FOSTER" run $FOSTER_ARGS --no-socket --events-log "$DIR/events" "$CFG" 2>>"$DIR/stderr" &
  PID=$!
  STOP="kill -TERM $PID"
}
start_fosterdefault() {
  FOSTER_ARGS=
  start_foster "$@"
  FOSTER_ARGS="-q --no-contain"
}
foster_ready() { grep -q "\"helper\":\"h$(($CHAIN - 1))\",\"state\":\"ready\"" "$DIR/events" 2>/dev/null; }

# --- s6 ---
s6_service() { # I MODE
  d=$DIR/scan/h$1
  mkdir -p "$d"
  if [ "$2" = chain ]; then
    echo 3 > "$d/notification-fd"
    {
      echo '#!/bin/sh'
      # Until the previous service's s6-supervise is up, s6-svwait cannot wait on it yet.
      [ "$1" -eq 0 ] || echo "until s6-svwait -U $DIR/scan/h$(($1 - 1)) 2>/dev/null; do sleep 0.05; done"
      echo 'echo >&3'
      echo "exec $SLEEP"
    } > "$d/run"
  else
    printf '#!/bin/sh\nexec %s\n' "$SLEEP" > "$d/run"
  fi
  chmod +x "$d/run"
}
s6_plain() { s6_service "$1" plain; }
s6_chain() { s6_service "$1" chain; }
start_s6() { # MODE COUNT
  rm -rf "$DIR/scan"
  mkdir -p "$DIR/scan"
  each "$2" s6_$1
  KIND=s6
  T0=$(now_ms)
  s6-svscan -c 4000 "$DIR/scan" 2>/dev/null &
  PID=$!
  STOP="s6-svscanctl -t $DIR/scan"
}
s6_ready() { s6-svwait -U -t 100 "$DIR/scan/h$(($CHAIN - 1))" 2>/dev/null; }

# --- supervisord ---
sv_program() { # I: priority = start order (supervisord has no readiness)
  printf '[program:h%s]\ncommand=%s\nstartsecs=0\npriority=%s\n' "$1" "$SLEEP" $(($1 + 1))
}
sv_plain() { sv_program "$1"; }
sv_chain() { sv_program "$1"; }
start_sv() { # MODE COUNT
  rm -rf "$DIR/sv"
  mkdir -p "$DIR/sv"
  {
    printf '[supervisord]\nnodaemon=true\nminfds=8192\n'
    printf 'logfile=%s/sv/supervisord.log\npidfile=%s/sv/pid\nchildlogdir=%s/sv\n' "$DIR" "$DIR" "$DIR"
    each "$2" sv_$1
  } > "$DIR/sv/supervisord.conf"
  KIND=sv
  T0=$(now_ms)
  supervisord -c "$DIR/sv/supervisord.conf" >/dev/null 2>&1 &
  PID=$!
  STOP="kill -TERM $PID"
}

# measure NAME KIND MODE COUNT [READY]: start, wait until COUNT sleeps run (and READY holds),
# idle, stop; one line of figures.
measure() {
  name=$1 kind=$2 mode=$3 count=$4 ready=${5:-true}
  case $name in $ONLY) ;; *) return 0 ;; esac
  start_$kind "$mode" "$count"
  while [ "$(running)" -lt "$count" ] || ! $ready; do sleep 0.05; done
  up=$(( $(now_ms) - T0 ))
  sleep 1
  mem=$(sum_mem)
  c0=$(sum_status) t0=$(sum_cpu)
  sleep "$IDLE"
  c1=$(sum_status) t1=$(sum_cpu)
  nprocs=$(procs | wc -l)
  s0=$(now_ms)
  eval "$STOP"
  wait "$PID" || true
  while [ "$(running)" -gt 0 ]; do sleep 0.05; done
  down=$(( $(now_ms) - s0 ))
  PID= STOP=
  awk -v n="$name" -v up="$up" -v mem="$mem" -v w=$((c1 - c0)) -v c=$((t1 - t0)) -v tick="$TICK" \
    -v down="$down" -v np="$nprocs" 'BEGIN {
    printf "%-22s %8.2f s  %5d  %-18s %7d  %6.2f s  %6.2f s\n", n, up / 1000, np, mem, w, c / tick, down / 1000
  }'
  echo "$name|$up|$down" >> "$DIR/times"
}
# medians: the median up and stop time of each case measured more than once.
medians() {
  [ -s "$DIR/times" ] || return 0
  echo "medians of the rounds (up, stop):"
  cut -d'|' -f1 "$DIR/times" | sort -u | while read -r name; do
    runs=$(grep -cF "$name|" "$DIR/times")
    [ "$runs" -ge 2 ] || continue
    m=$(((runs + 1) / 2))
    up=$(grep -F "$name|" "$DIR/times" | cut -d'|' -f2 | sort -n | sed -n "${m}p")
    down=$(grep -F "$name|" "$DIR/times" | cut -d'|' -f3 | sort -n | sed -n "${m}p")
    awk -v n="$name" -v up="$up" -v down="$down" -v r="$runs" 'BEGIN {
      printf "  %-22s %8.2f s  %6.2f s  (%d runs)\n", n, up / 1000, down / 1000, r
    }'
  done
}

echo "scale: $N helpers, a chain of $CHAIN; idle window ${IDLE}s; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg); $(ls -d /proc/[0-9]* | wc -l) processes"
echo "(up: until all running / ready; procs: the supervisor's own; RSS PSS summed; wake-ups and CPU over the idle window; stop: until all ended)"
printf '%-22s %10s  %5s  %-18s %7s  %8s  %8s\n' case up procs "RSS       PSS" wake-ups "idle CPU" stop
r=0
while [ $r -lt "$ROUNDS" ]; do
  measure "plain: foster" fosterdefault plain "$N"
  if [ -n "$FOSTER_BEFORE" ]; then
    AFTER=$FOSTER FOSTER=$FOSTER_BEFORE
    measure "plain: foster before" fosterdefault plain "$N"
    FOSTER=$AFTER
  fi
  measure "plain: foster -q --nc" foster plain "$N"
  measure "plain: s6-svscan" s6 plain "$N"
  measure "plain: supervisord" sv plain "$N"
  r=$((r + 1))
done
measure "chain: foster" foster chain "$CHAIN" foster_ready
measure "chain (fd 3): foster" foster chainfd "$CHAIN" foster_ready
measure "chain: s6-svscan" s6 chain "$CHAIN" s6_ready
measure "chain: supervisord" sv chain "$CHAIN"
measure "health: foster" foster health "$N"
medians
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
left=$(pgrep -f "$SLEEP" || true)
if [ -n "$left" ]; then echo "LEFT BEHIND: $left"; kill $left; exit 1; fi
