#!/bin/sh
# foster top --attach, idle: the CPU the dashboard uses (and the CPU its readings cost the
# supervisor) while nothing in the supervised tree changes. A quiet tree (three helpers, one of
# them with two children) under `foster run --socket`; the supervisor's CPU is measured first
# with no client, then with the dashboard attached at a 1 s interval in a real terminal (tmux).
# CPU time is se.sum_exec_runtime of /proc/PID/task/*/sched (every thread, microseconds).
#
#   cargo build --release && sh benches/top_attached_idle.sh [SECONDS]
#
# Needs tmux. Everything it starts is torn down at the end, by pid.
set -eu
SECS=${1:-30}
FOSTER=${FOSTER:-$(pwd)/target/release/foster}
[ -x "$FOSTER" ] || { echo "build first: cargo build --release" >&2; exit 1; }
DIR=$(mktemp -d)
SOCK=foster-attached-bench-$$
cat > "$DIR/quiet.toml" <<'EOT'
[[helper]]
name = "one"
command = ["sleep", "100000"]
[[helper]]
name = "two"
command = ["sleep", "100000"]
[[helper]]
name = "pool"
command = ["/bin/sh", "-c", "sleep 100000 & sleep 100000 & wait"]
EOT
# Uncontained: $SUP is the supervisor itself (contained, it would be the outer foster).
"$FOSTER" -q run --no-contain --socket "$DIR/s.sock" "$DIR/quiet.toml" &
SUP=$!
cleanup() {
    tmux -L "$SOCK" kill-server 2>/dev/null || true
    kill -TERM "$SUP" 2>/dev/null || true
    wait "$SUP" 2>/dev/null || true
    rm -rf "$DIR"
}
trap cleanup EXIT
while [ ! -S "$DIR/s.sock" ]; do sleep 0.1; done

cpu_us() { cat /proc/"$1"/task/*/sched | awk '/sum_exec_runtime/ { s += $3 } END { printf "%d\n", s * 1000 }'; }
pct() { awk -v d="$1" -v s="$SECS" 'BEGIN { printf "%.3f", d * 100 / (s * 1e6) }'; }
ms() { awk -v d="$1" -v s="$SECS" 'BEGIN { printf "%.3f", d / 1e3 / s }'; }

sleep 2
s0=$(cpu_us "$SUP"); sleep "$SECS"; s1=$(cpu_us "$SUP")

tmux -L "$SOCK" new-session -d -s b -x 160 -y 40 "$FOSTER top --attach $DIR/s.sock --interval 1s"
TOP=$(tmux -L "$SOCK" display-message -p -t b '#{pane_pid}')
sleep 5
t0=$(cpu_us "$TOP"); a0=$(cpu_us "$SUP")
sleep "$SECS"
t1=$(cpu_us "$TOP"); a1=$(cpu_us "$SUP")

echo "window: ${SECS}s   interval: 1s   tree: supervisor, 3 helpers, 2 grandchildren"
echo "supervisor, no client                : $(pct $((s1 - s0)))% of a core ($(ms $((s1 - s0))) ms per second)"
echo "supervisor, dashboard attached       : $(pct $((a1 - a0)))% of a core ($(ms $((a1 - a0))) ms per second)"
echo "foster top --attach (all its threads): $(pct $((t1 - t0)))% of a core ($(ms $((t1 - t0))) ms per second)"
