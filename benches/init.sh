#!/bin/sh
# Container-init benchmark: foster init and foster-init side by side with tini, dumb-init and
# catatonit, each as PID 1 of its own PID namespace (unshare --pid --fork --mount-proc), in one run.
#
#   0. the size of each init's binary (foster-init: the static musl build of [profile.init]);
#   1. resident memory (VmRSS) of the idle init running `sleep`, after 2 s of settling;
#   2. voluntary context switches (wake-ups) of the idle init over 10 s;
#   3. 5,000 orphans (double-forked, all ending at once) until every one is reaped: the whole
#      `unshare ... INIT -- bench_init storm 5000 0` run, rounds interleaving the five inits;
#   4. signal-forwarding latency: SIGUSR1 to the init until PROGRAM takes it (1,000 rounds).
#
# Needs root (unshare), tini, dumb-init, catatonit (Debian packages). foster is the
# static release build (see docs/init.md); FOSTER=path overrides it. foster-init is built with
# `--profile init --target x86_64-unknown-linux-musl` (docs/install.md); FOSTER_INIT=path
# overrides it.
set -eu
cd "$(dirname "$0")/.."
TARGET=x86_64-unknown-linux-gnu
FOSTER=${FOSTER:-target/$TARGET/release/foster}
RUNS=${RUNS:-10}
if [ ! -x "$FOSTER" ]; then
    RUSTFLAGS='-C target-feature=+crt-static' cargo build --release --target $TARGET
fi
FOSTER_INIT=${FOSTER_INIT:-target/x86_64-unknown-linux-musl/init/foster-init}
if [ ! -x "$FOSTER_INIT" ]; then
    cargo build --profile init --target x86_64-unknown-linux-musl --bin foster-init
fi
cargo build --release --example bench_init >/dev/null 2>&1
HELPER=target/release/examples/bench_init

INITS="$FOSTER init|$FOSTER_INIT|tini|dumb-init|catatonit"

echo "== binary size (tini-static, the size goal, when installed)"
for bin in "$FOSTER" "$FOSTER_INIT" tini tini-static dumb-init catatonit; do
    path=$(command -v "$bin" || true)
    [ -n "$path" ] || continue
    printf '%-60s %9d bytes  %s\n' "$bin" "$(stat -L -c %s "$path")" \
        "$(file -L "$path" | grep -o 'statically linked\|static-pie linked\|dynamically linked')"
done

echo "== idle: resident memory and wake-ups (each init as PID 1 running sleep)"
pids=""
IFS='|'
for init in $INITS; do
    unset IFS
    # shellcheck disable=SC2086
    unshare --pid --fork --mount-proc $init -- sleep 60 &
    pids="$pids $!"
    IFS='|'
done
unset IFS
child_of() { for p in /proc/[0-9]*; do awk -v u="$1" '$4==u {print $1}' "$p/stat" 2>/dev/null; done | head -1; }
# Each init is up once it has a child (its sleep); bounded, then 2 s of settling.
for u in $pids; do
    t=0
    until c=$(child_of "$u") && [ -n "$c" ] && [ -n "$(child_of "$c")" ]; do
        t=$((t + 1)); [ $t -gt 300 ] && { echo "init under $u did not start" >&2; exit 1; }
        sleep 0.1
    done
done
sleep 2
field() { awk -v k="$2:" '$1==k {print $2}' "/proc/$1/status"; }
set -- $pids
inits=""
for u in "$@"; do inits="$inits $(child_of "$u")"; done
before=""
for p in $inits; do before="$before $(field "$p" voluntary_ctxt_switches)"; done
sleep 10
set -- $before
for p in $inits; do
    name=$(tr '\0' ' ' < "/proc/$p/cmdline" | cut -d' ' -f1-2)
    after=$(field "$p" voluntary_ctxt_switches)
    printf '%-60s VmRSS %5s kB (anon %s kB, file %s kB)  wake-ups in 10 s: %s\n' "$name" \
        "$(field "$p" VmRSS)" "$(field "$p" RssAnon)" "$(field "$p" RssFile)" $((after - $1))
    shift
    kill -KILL "$p"
done
wait 2>/dev/null || true

echo "== 5,000-orphan storm until all reaped ($RUNS rounds, the five inits interleaved)"
# Interleaved rounds (rotating order) rather than one init after the other: the machine's load
# drifts, and it must not favour whichever init runs in the quiet minute.
T=$(mktemp -d)
round=0
while [ $round -lt "$RUNS" ]; do
    i=0
    for init in "$FOSTER init" "$FOSTER_INIT" tini dumb-init catatonit \
        "$FOSTER init" "$FOSTER_INIT" tini dumb-init; do
        i=$((i + 1))
        [ $i -le $((round % 5)) ] && continue
        [ $i -gt $((round % 5 + 5)) ] && break
        case "$init" in
            "$FOSTER init") name=foster_init ;;
            "$FOSTER_INIT") name=foster-init ;;
            *) name=$init ;;
        esac
        t0=$(date +%s%N)
        # shellcheck disable=SC2086
        unshare --pid --fork --mount-proc $init -- "$HELPER" storm 5000 0
        t1=$(date +%s%N)
        echo $(((t1 - t0) / 1000000)) >> "$T/$name"
    done
    round=$((round + 1))
done
for name in foster_init foster-init tini dumb-init catatonit; do
    sort -n "$T/$name" | awk -v n="$name" '{a[NR]=$1} END {printf "%-12s median %d ms  (min %d, max %d, %d runs)\n", n, a[int((NR+1)/2)], a[1], a[NR], NR}'
done
rm -rf "$T"

echo "== signal forwarding latency"
"$HELPER" latency 1000 "$FOSTER" init
"$HELPER" latency 1000 "$FOSTER_INIT"
"$HELPER" latency 1000 tini
"$HELPER" latency 1000 dumb-init
"$HELPER" latency 1000 catatonit
