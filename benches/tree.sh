#!/usr/bin/env bash
# Tree scan benchmark (issue 2): the whole-process time of `foster tree -a --root 1` over about
# N extra processes, against pstree, ps and a raw read of every stat file, in one hyperfine run;
# also `foster tree --plain -p -a 1`, pstree's layout with its threads, like for like with
# `pstree -p -a`.
# Starts N sleeps under one parent shell and stops them by pid afterwards.
# Usage: benches/tree.sh [N]   (default 1000; RUNS=30 runs at least; more hyperfine options in HYPERFINE_OPTS)
# With BASELINE=/path/to/another/foster, also an interleaved comparison on a shared machine: each
# of ROUNDS rounds (default 40) runs that binary's `tree -a --root 1`, this one's and pstree one
# after the other; printed are each command's median wall time and median CPU time (user +
# system, from bash's `time`), so that load changing during the run hits all three alike.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000}

cargo build --release --quiet --bin foster --example bench_tree_scan
foster=$PWD/target/release/foster
work=$(mktemp -d)
pids=$work/pids
parent=

cleanup() {
    if [ -s "$pids" ]; then
        # shellcheck disable=SC2046
        kill $(cat "$pids") 2>/dev/null || true
    fi
    if [ -n "$parent" ]; then
        kill "$parent" 2>/dev/null || true
        wait "$parent" 2>/dev/null || true
    fi
    # Signals are delivered asynchronously: give the sleeps a bounded moment to end. A sleep
    # that is now a zombie awaiting init counts as ended.
    left=0
    for _ in $(seq 100); do
        left=0
        if [ -s "$pids" ]; then
            for p in $(cat "$pids"); do
                stat=$(cat "/proc/$p/stat" 2>/dev/null) || continue
                case $stat in *"(sleep) Z "*) ;; *"(sleep) "*) left=$((left + 1)) ;; esac
            done
        fi
        [ "$left" = 0 ] && break
        sleep 0.05
    done
    rm -rf "$work"
    [ "$left" = 0 ] || echo "benches/tree.sh: $left processes left" >&2
}
trap cleanup EXIT

# One parent shell starts N sleeps, writes their pids, then says it is ready and waits.
mkfifo "$work/ready"
sh -c '
    n=$1; out=$2
    i=0
    while [ "$i" -lt "$n" ]; do sleep 100000 & echo $! >> "$out"; i=$((i + 1)); done
    echo ready
    wait
' bench-parent "$N" "$pids" > "$work/ready" &
parent=$!
read -r _ < "$work/ready"
echo "started $N sleeps under pid $parent; $(ls -d /proc/[0-9]* 2>/dev/null | wc -l) processes in all" >&2

# shellcheck disable=SC2086
hyperfine -N -i --warmup 5 --min-runs "${RUNS:-30}" ${HYPERFINE_OPTS:-} \
    --export-markdown "$work/result.md" --export-json "$work/result.json" \
    "$foster tree -a --root 1" \
    "$foster tree --plain -p -a 1" \
    "pstree -p -a" \
    "ps -e -o pid,ppid,stat,lstart,args" \
    "sh -c 'cat /proc/[0-9]*/stat >/dev/null'" >&2
cat "$work/result.md"
if command -v jq >/dev/null; then
    echo
    echo "medians (ms):"
    jq -r '.results[] | "\(.median * 1000 | . * 10 | round / 10)\t\(.command)"' "$work/result.json"
fi
echo
target/release/examples/bench_tree_scan 50

if [ -n "${BASELINE:-}" ]; then
    echo
    echo "interleaved, ${ROUNDS:-40} rounds (medians, ms), load $(cut -d' ' -f1 /proc/loadavg):"
    TIMEFORMAT='%R %U %S'
    cmds=("$BASELINE tree -a --root 1" "$foster tree -a --root 1" "pstree -p -a")
    for _ in $(seq "${ROUNDS:-40}"); do
        for i in 0 1 2; do
            # shellcheck disable=SC2086
            { time ${cmds[$i]} >/dev/null 2>&1; } 2>> "$work/times.$i"
        done
    done
    printf 'wall\tcpu\tcommand\n'
    for i in 0 1 2; do
        wall=$(awk '{ print $1 * 1000 }' "$work/times.$i" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
        cpu=$(awk '{ print ($2 + $3) * 1000 }' "$work/times.$i" | sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
        printf '%s\t%s\t%s\n' "$wall" "$cpu" "${cmds[$i]}"
    done
fi
