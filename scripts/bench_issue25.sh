#!/usr/bin/env bash
# Issue 25's benchmarks, the baseline and this checkout interleaved in one sitting (run it on an
# idle machine; nothing else running). Prints each command's table and keeps JSON in $OUT.
#
#   scripts/bench_issue25.sh                 # N=100000: inject (both backends), serve; ~1M skipped
#   N=2000 QUERIES=40 CALLS=80 scripts/bench_issue25.sh   # a quick check that everything runs
#   BIG=1 scripts/bench_issue25.sh           # also `bench inject --memories 1000000` (SQLite)
#
# How long (idle 2-core machine, estimated from docs/benchmarks.md's build rate of ~200
# memories/s and today's runs at small N): building the store of 100,000 once ~9 min; each
# `inject --backend sqlite,postgres --load-from` ~3 min (the PostgreSQL copy included); each
# `serve` ~2 min (three a repeat: base, new, new --workers 1); so ~34 min with REPEAT=2, ~22
# min with REPEAT=1. BIG=1 first builds a store
# of 1,000,000 (~90 min at that rate): it does not fit a 10-minute slot unless $OUT/home-1000000
# was built before (then each 1M inject run is a few minutes). Checked at N=400 (REPEAT=1): the
# whole script ran (exit 0), 0 errors and 0 lost writes in both versions' serve runs.
#
# BASE (default c0d530d, the head before this session) is checked out once, detached, under
# $OUT/base and run with this checkout's virtual environment (PYTHONPATH puts its src/ first;
# the dependencies did not change). The store of N memories is built once, by the baseline, into
# $OUT/home-N (embedding N texts: the long part of a first run, ~2 ms a text on an idle 2-core
# machine, plus the write path); every timed command then runs on a copy of it (`--load-from`
# copies it into each backend; `bench serve --home` works on a copy; the 1M inject runs on a
# copy per version), so both versions search the same memories and the newer code's migrations
# never touch what the baseline opens. Order per command: baseline, new, baseline, new
# (REPEAT=2): report the medians and the new/baseline ratio of each pair.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BASE=${BASE:-c0d530d}
N=${N:-100000}
QUERIES=${QUERIES:-200}
CALLS=${CALLS:-400}
REPEAT=${REPEAT:-2}
OUT=${OUT:-/tmp/bench25}
MEMLANE=${MEMLANE:-$ROOT/.venv/bin/memlane}
mkdir -p "$OUT"
if [ ! -d "$OUT/base" ]; then
  git -C "$ROOT" worktree add --detach "$OUT/base" "$BASE" >/dev/null
fi

run() {  # run LABEL ARGS...: one bench command of one version, its JSON kept in $OUT
  local label=$1 src
  shift
  if [ "$label" = base ]; then src=$OUT/base/src; else src=$ROOT/src; fi
  local name
  name="$label-$(echo "$*" | tr -c 'A-Za-z0-9\n' '_' | cut -c1-80)-$(date +%H%M%S).json"
  echo "== $label ($(git -C "$(dirname "$src")" rev-parse --short HEAD)): memlane $*" >&2
  local started=$SECONDS
  PYTHONPATH=$src MEMLANE_BENCH_CACHE=$OUT/cache "$MEMLANE" "$@" --json >"$OUT/$name"
  echo "   $((SECONDS - started)) s -> $OUT/$name" >&2
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d, indent=1)[:6000])' "$OUT/$name"
}

home() {  # home N: the bench home of N memories, built once by the baseline
  local n=$1
  if [ ! -f "$OUT/home-$n/.built" ]; then
    rm -rf "$OUT/home-$n"
    run base bench inject --memories "$n" --queries 5 --warmup 1 --home "$OUT/home-$n" >&2
    # --load-from reads the source home's settings: an empty file (the defaults it was built with)
    touch "$OUT/home-$n/memlane.toml" "$OUT/home-$n/.built"
  fi
  echo "$OUT/home-$n"
}

H=$(home "$N")
# 1. inject, both backends in one run (each gets a copy of the home's store)
for i in $(seq "$REPEAT"); do
  for v in base new; do
    run $v bench inject --memories "$N" --queries "$QUERIES" --backend sqlite,postgres \
      --clients 1 --load-from "$H"
  done
done
# 2. the HTTP server against the same calls in-process, 1, 8 and 32 clients (on a copy); the new
# server runs its default worker processes (2 on 2 cores), then one worker: what the workers
# add apart from the engine's own cost per call (bench serve reports server_cores per level)
for i in $(seq "$REPEAT"); do
  for v in base new; do
    run $v bench serve --memories "$N" --calls "$CALLS" --clients 1,8,32 --home "$H"
  done
  run new bench serve --memories "$N" --calls "$CALLS" --clients 1,8,32 --home "$H" --workers 1
done
# 3. one million memories (SQLite), each version on its own copy of the store
if [ "${BIG:-0}" = 1 ]; then
  BIGH=$(home 1000000)
  for v in base new; do
    [ -d "$OUT/home-1m-$v" ] || cp -a "$BIGH" "$OUT/home-1m-$v"
  done
  for i in $(seq "$REPEAT"); do
    for v in base new; do
      run $v bench inject --memories 1000000 --queries "$QUERIES" --home "$OUT/home-1m-$v"
    done
  done
fi
