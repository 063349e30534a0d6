#!/bin/sh
# Output benchmark (issue 13): a helper writes MB megabytes (10^6 bytes) of 100-byte lines as
# fast as it can (`yes` of 99 characters through `head -c`), and something takes them to a
# file. Side by side, one after the other:
#   cat           the floor: the generator piped into `cat > FILE`
#   foster relay  `foster run > FILE`: every line as `gen | line` (escaped)
#   foster log    `foster run --output none`, the helper's `log = { file }` (a timestamp and the
#                 stream on each line, no rotation)
#   s6-log        s6-svscan / s6-supervise, the service's log/run `s6-log T` (an ISO 8601
#                 timestamp on each line) into a log directory (files of up to 100 MB)
#   supervisord   a [program] with stdout_logfile (no rotation)
# For each: the wall time from the generator's start (it makes a file first) until the file
# holds every line (both polled every 10 ms, so +-20 ms), the CPU time the process that takes
# the lines spent in that window (utime + stime of cat, foster, s6-log or supervisord alone,
# from /proc/PID/stat, not its children's: the generator's own cost is the same everywhere;
# start-up is left out), per MB, and its peak resident memory (VmHWM).
# Usage: benches/output_throughput.sh [MB]   (default 200; needs a release build)
# The generator writes about 1 GB/s, so 200 MB takes a fraction of a second and the 10 ms polls
# weigh on it: 2000 MB gives steadier figures. TMPDIR=/dev/shm keeps the disk's write-back out
# of the comparison (every taker then writes to memory).
set -eu
MB=${1:-200}
BYTES=$((MB * 1000000))
LINES=$((BYTES / 100))
FOSTER=${FOSTER:-$(pwd)/target/release/foster}
DIR=$(mktemp -d)
trap 'cleanup; rm -rf "$DIR"' EXIT
trap 'exit 1' INT TERM
X=$(printf '%099d' 0 | tr 0 x)
# The generator marks its start (a file of its own), then writes.
GEN="touch $DIR/started; yes $X | head -c $BYTES"
TICK=$(getconf CLK_TCK)
cleanup() {
  [ -n "${KILL:-}" ] && eval "$KILL" >/dev/null 2>&1 || true
  KILL=
}

# size FILES...: their total size (missing ones count 0); a directory counts the files in it.
size() {
  for f in "$@"; do
    if [ -d "$f" ]; then stat -c %s "$f"/* 2>/dev/null; else stat -c %s "$f" 2>/dev/null; fi
  done | awk '{ n += $1 } END { printf "%.0f\n", n }'
}
# cpu PID, rss PID
cpu() { awk '{print $14+$15}' /proc/$1/stat 2>/dev/null || echo 0; }
rss() { awk '/^VmHWM/ {print $2}' /proc/$1/status 2>/dev/null || echo 0; }
now() { date +%s%N; }

# measure NAME PID EXPECTED FILES...: waits for the generator's start, then for EXPECTED
# bytes in FILES (EXPECTED: a number, or a function that says it once the lines come).
measure() {
  name=$1 pid=$2 want=$3
  shift 3
  while [ ! -e "$DIR/started" ]; do sleep 0.01; done
  t0=$(now) c0=$(cpu "$pid")
  case $want in *[!0-9]*) want=$($want) ;; esac
  while [ "$(size "$@")" -lt "$want" ]; do sleep 0.01; done
  t1=$(now)
  c=$(( $(cpu "$pid") - c0 )) m=$(rss "$pid")
  rm -f "$DIR/started"
  ms=$(( (t1 - t0) / 1000000 ))
  awk -v n="$name" -v ms="$ms" -v c="$c" -v tick="$TICK" -v mb="$MB" -v m="$m" 'BEGIN {
    s = ms / 1000; cpu = c / tick
    printf "%-12s wall %6.2f s  %7.1f MB/s   cpu %6.2f s = %5.2f ms/MB   peak RSS %6d kB\n",
      n, s, mb / s, cpu, cpu * 1000 / mb, m
  }'
}

echo "$MB MB, $LINES lines of 100 bytes; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"

# cat, the floor (through a FIFO, so that both ends are known by pid and stay until killed).
mkfifo "$DIR/fifo"
sh -c "$GEN; exec sleep 100000" > "$DIR/fifo" &
GENPID=$!
cat < "$DIR/fifo" > "$DIR/cat.out" &
CAT=$!
KILL="kill $GENPID $CAT; wait $GENPID $CAT"
measure cat "$CAT" "$BYTES" "$DIR/cat.out"
cleanup; rm -f "$DIR/cat.out"

# foster, relayed to a file.
cat > "$DIR/relay.toml" <<EOT
[[helper]]
name = "gen"
command = ["/bin/sh", "-c", "$GEN; exec sleep 100000"]
EOT
$FOSTER run --no-contain --no-socket "$DIR/relay.toml" > "$DIR/relay.out" 2> "$DIR/err" &
PID=$!
KILL="kill -TERM $PID; wait $PID"
measure "foster relay" "$PID" $((LINES * 106)) "$DIR/relay.out"
cleanup; rm -f "$DIR/relay.out"

# foster, a log file.
cat > "$DIR/log.toml" <<EOT
[[helper]]
name = "gen"
command = ["/bin/sh", "-c", "$GEN; exec sleep 100000"]
log = { file = "$DIR/gen.log", max_size = 0 }
EOT
$FOSTER run --no-contain --no-socket --output none "$DIR/log.toml" 2> "$DIR/err" &
PID=$!
KILL="kill -TERM $PID; wait $PID"
measure "foster log" "$PID" $((LINES * 129)) "$DIR/gen.log"
cleanup; rm -f "$DIR/gen.log"

# s6-supervise and s6-log.
mkdir -p "$DIR/scan/gen/log" "$DIR/s6log"
printf '#!/bin/sh\n%s\nexec sleep 100000\n' "$GEN" > "$DIR/scan/gen/run"
# Enough archives of 100 MB to keep every line (s6-log deletes the oldest beyond n).
S6N=$((MB / 50 + 2))
printf '#!/bin/sh\nexec s6-log n%s s100000000 T %s\n' "$S6N" "$DIR/s6log" > "$DIR/scan/gen/log/run"
chmod +x "$DIR/scan/gen/run" "$DIR/scan/gen/log/run"
s6-svscan "$DIR/scan" 2> "$DIR/err" &
SCAN=$!
KILL="s6-svscanctl -t $DIR/scan; wait $SCAN"
while ! S6LOG=$(pgrep -n -f "s6-log n$S6N s100000000 T $DIR/s6log"); do sleep 0.01; done
# Every line is 100 bytes and s6-log's timestamp, whose length the first line tells.
s6_want() {
  while [ "$(size "$DIR/s6log/current")" -lt 200 ]; do sleep 0.01; done
  echo $((LINES * ($(head -1 "$DIR/s6log/current" | wc -c))))
}
measure s6-log "$S6LOG" s6_want "$DIR/s6log"
cleanup

# supervisord.
cat > "$DIR/supervisord.conf" <<EOT
[supervisord]
nodaemon=true
logfile=$DIR/supervisord.log
pidfile=$DIR/supervisord.pid
[program:gen]
command=/bin/sh -c "$GEN; exec sleep 100000"
stdout_logfile=$DIR/sv.out
stdout_logfile_maxbytes=0
EOT
supervisord -c "$DIR/supervisord.conf" > "$DIR/err" 2>&1 &
SV=$!
KILL="kill -TERM $SV; wait $SV"
measure supervisord "$SV" "$BYTES" "$DIR/sv.out"
cleanup
