#!/bin/sh
# Containment benchmark (issue 11): what survives a SIGKILL of `foster run` (the OOM killer's
# way), contained (the default) against `--no-contain`.
# Each round starts `foster run` on one helper, a shell that starts an unarmed `sleep` (a
# generation-2 process that never arms a parent-death signal) every 50 ms, waits for the
# helper's launch event and then a random 0 to 1 s, SIGKILLs foster, waits 2 s (longer than the helper's gate needs: its parent-death
# signal is TERM, at once), then counts the live processes that carry the round's marker in
# their environment (the helper's `env`, inherited by all it starts), kills them, and checks
# that none is left before the next round. Then it times 100 whole runs of a one-helper tree
# each way, interleaved (the probe and the namespace's set-up are the difference).
# Usage: benches/contain_kill.sh [ROUNDS]   (default 60; needs a release build; run as root for
# the privileged way, as another user for the user-namespace way)
set -eu
ROUNDS=${1:-60}
FOSTER=${FOSTER:-target/release/foster}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
TAG="containbench$$"

# The pids of live (non-zombie) processes whose environment holds MARK=$1.
marked() {
  for d in /proc/[0-9]*; do
    if { tr '\0' '\n' < "$d/environ"; } 2>/dev/null | grep -qx "FOSTER_BENCH_MARK=$1"; then
      state=$(awk '{ print $3 }' "$d/stat" 2>/dev/null || echo Z)
      [ "$state" = Z ] || echo "${d#/proc/}"
    fi
  done
}

round() { # MODE ROUND → prints the number of survivors
  mode=$1 n=$2
  mark="$TAG-$mode-$n"
  cfg=$DIR/$mark.toml
  cat > "$cfg" <<EOT
[[helper]]
name = "forker"
command = ["/bin/sh", "-c", "while :; do sleep 100000 & sleep 0.05; done"]
env = { FOSTER_BENCH_MARK = "$mark" }
EOT
  flag=""
  [ "$mode" = uncontained ] && flag=--no-contain
  # shellcheck disable=SC2086
  "$FOSTER" -q run --no-socket $flag --events-log "$DIR/$mark.events" "$cfg" &
  pid=$!
  # A moment of the supervision, not of foster's start: from its helper's launch on.
  until grep -q '"launch"' "$DIR/$mark.events" 2>/dev/null; do sleep 0.01; done
  sleep "$(awk -v s="$n$$" 'BEGIN { srand(s); printf "%.3f\n", rand() }')"
  kill -KILL "$pid"
  wait "$pid" 2>/dev/null || true
  sleep 2
  left=$(marked "$mark")
  count=$(echo "$left" | grep -c . || true)
  [ -n "$left" ] && kill -KILL $left 2>/dev/null
  sleep 0.2
  [ -z "$(marked "$mark")" ] || { echo "round $mark: survivors could not be ended" >&2; exit 1; }
  # Whether this foster really was contained, from its start event.
  grep -q '"contained":true' "$DIR/$mark.events" && echo "$count yes" || echo "$count no"
}

# Whole runs of a one-helper tree (/bin/true: start, launch, exit, stop), the two modes
# interleaved so that the machine's load drift favours neither; median and minimum, µs.
run_times() { # RUNS
  out=$DIR/times
  printf '[[helper]]\nname = "t"\ncommand = ["/bin/true"]\n' > "$DIR/t.toml"
  for i in $(seq "$1"); do
    for mode in contained uncontained; do
      flag=""
      [ "$mode" = uncontained ] && flag=--no-contain
      t0=$(date +%s%N)
      # shellcheck disable=SC2086
      "$FOSTER" -q run --no-socket $flag "$DIR/t.toml"
      t1=$(date +%s%N)
      echo "$mode $(( (t1 - t0) / 1000 ))" >> "$out"
    done
  done
  for mode in contained uncontained; do
    grep "^$mode " "$out" | cut -d' ' -f2 | sort -n | awk -v m="$mode" \
      '{ v[NR] = $1 } END { printf "%s run: median %d us, min %d us (%d runs)\n", m, v[int((NR + 1) / 2)], v[1], NR }'
  done
}

for mode in contained uncontained; do
  total=0 hit=0 n=0 inside=0
  while [ $n -lt "$ROUNDS" ]; do
    r=$(round "$mode" "$n")
    c=${r% *}
    total=$((total + c))
    [ "$c" -gt 0 ] && hit=$((hit + 1))
    [ "${r#* }" = yes ] && inside=$((inside + 1))
    n=$((n + 1))
  done
  echo "$mode: $ROUNDS SIGKILLs ($inside contained), $total survivors in all," \
    "rounds with a survivor: $hit"
done
run_times 100
