#!/bin/sh
# foster top against htop and btop: CPU used by each, side by side in one run, with about N
# processes on the machine and the same refresh interval (1 s), in terminals of 160x45, each
# with its meters on (foster top's meters and history are on by default); plus foster top's
# idle cost on a quiet subtree, and how many bytes it wrote to its terminal meanwhile (0 when it
# never redrew). Each dashboard runs in its own tmux window (a real terminal); its CPU is the
# time its threads spent on a CPU over the measured window: se.sum_exec_runtime of
# /proc/PID/task/*/sched (milliseconds with six decimals: finer than the clock ticks of
# utime+stime).
#
#   cargo build --release && sh benches/top_cpu.sh [N] [SECONDS]
#
# Needs tmux, htop and btop (Debian packages tmux, htop, btop); btop is skipped when missing.
# Everything it starts is torn down at the end.
set -eu
N=${1:-1000}
SECS=${2:-30}
FOSTER=${FOSTER:-$(pwd)/target/release/foster}
SOCK=foster-bench-$$
TMP=$(mktemp -d)

[ -x "$FOSTER" ] || { echo "build first: cargo build --release" >&2; exit 1; }

# The load: N-ish processes that sleep, under one shell so teardown is by pid.
existing=$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)
want=$((N - existing))
[ "$want" -lt 0 ] && want=0
sh -c "i=0; while [ \$i -lt $want ]; do sleep 3600 & i=\$((i+1)); done; wait" &
LOAD=$!
# A quiet subtree for the idle measurement: a shell and five sleeps.
sh -c 'for i in 1 2 3 4 5; do sleep 3600 & done; wait' &
QUIET=$!

cleanup() {
    tmux -L "$SOCK" kill-server 2>/dev/null || true
    # The sleeps, by pid: the children of the two shells this script started.
    kill $(ps -o pid= --ppid "$LOAD") $(ps -o pid= --ppid "$QUIET") 2>/dev/null || true
    kill "$LOAD" "$QUIET" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT

# Up to a minute for the load to be there; a machine that refuses some of its forks (a pids
# limit) is measured with what it has, and the figure printed below says how many.
waited=0
while [ "$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)" -lt "$N" ]; do
    waited=$((waited + 1))
    if [ "$waited" -ge 600 ]; then
        echo "only $(ls -d /proc/[0-9]* 2>/dev/null | wc -l) of $N processes after 60 s: measuring with these" >&2
        break
    fi
    sleep 0.1
done

# btop refreshes every update_ms (2 s by default): 1 s here, from a configuration of its own.
mkdir -p "$TMP/btop"
printf 'update_ms = 1000\n' > "$TMP/btop/btop.conf"

tmux -L "$SOCK" new-session -d -s b -x 160 -y 45 -n htop "htop -d 10"
tmux -L "$SOCK" new-window -t b -n whole "$FOSTER top --interval 1s"
tmux -L "$SOCK" new-window -t b -n idle "$FOSTER top --root $QUIET --interval 1s"
BTOP=""
if command -v btop >/dev/null; then
    tmux -L "$SOCK" new-window -t b -n btop "XDG_CONFIG_HOME=$TMP LANG=C.UTF-8 btop --utf-force"
fi

pane_pid() { tmux -L "$SOCK" display-message -p -t "b:$1" '#{pane_pid}'; }
HTOP=$(pane_pid htop)
WHOLE=$(pane_pid whole)
IDLE=$(pane_pid idle)
command -v btop >/dev/null && BTOP=$(pane_pid btop)

# CPU time of every thread of $1, in microseconds.
cpu_us() { cat /proc/"$1"/task/*/sched | awk '/sum_exec_runtime/ { s += $3 } END { printf "%d\n", s * 1000 }'; }

sleep 5   # let every dashboard reach its steady state
# What the idle dashboard writes to its terminal over the window.
tmux -L "$SOCK" pipe-pane -o -t b:idle "cat > $TMP/idle.out"
h0=$(cpu_us "$HTOP"); w0=$(cpu_us "$WHOLE"); i0=$(cpu_us "$IDLE")
[ -n "$BTOP" ] && t0=$(cpu_us "$BTOP")
load0=$(cut -d' ' -f1-3 /proc/loadavg)
sleep "$SECS"
h1=$(cpu_us "$HTOP"); w1=$(cpu_us "$WHOLE"); i1=$(cpu_us "$IDLE")
[ -n "$BTOP" ] && t1=$(cpu_us "$BTOP")
tmux -L "$SOCK" pipe-pane -t b:idle
procs=$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)

pct() { awk -v d="$1" -v s="$SECS" 'BEGIN { printf "%.3f", d * 100 / (s * 1e6) }'; }
ms() { awk -v d="$1" -v s="$SECS" 'BEGIN { printf "%.2f", d / 1e3 / s }'; }
echo "processes: $procs   window: ${SECS}s   interval: 1s   terminal: 160x45"
echo "load average before / after: $load0 / $(cut -d' ' -f1-3 /proc/loadavg)   cores: $(nproc)"
echo "htop -d 10                       : $(pct $((h1 - h0)))% of a core ($(ms $((h1 - h0))) ms per second)"
[ -n "$BTOP" ] && echo "btop (update_ms 1000)            : $(pct $((t1 - t0)))% of a core ($(ms $((t1 - t0))) ms per second)"
echo "foster top (whole system)        : $(pct $((w1 - w0)))% of a core ($(ms $((w1 - w0))) ms per second)"
echo "foster top --root (quiet subtree): $(pct $((i1 - i0)))% of a core ($(ms $((i1 - i0))) ms per second)"
echo "  bytes it wrote to its terminal : $(wc -c < "$TMP/idle.out")"
awk -v h=$((h1 - h0)) -v w=$((w1 - w0)) 'BEGIN { if (h > 0) printf "ratio foster/htop: %.2f\n", w / h }'
[ -n "$BTOP" ] && awk -v b=$((t1 - t0)) -v w=$((w1 - w0)) 'BEGIN { if (b > 0) printf "ratio foster/btop: %.2f\n", w / b }'
exit 0
