#!/usr/bin/env bash
# Issue 25's benchmarks, the baseline and this checkout interleaved in one sitting (run it on an
# idle machine; nothing else running). Prints each command's table and keeps JSON in $OUT.
#
#   scripts/bench_issue25.sh                 # N=100000: inject (both backends), serve; ~1M skipped
#   N=2000 QUERIES=40 CALLS=80 scripts/bench_issue25.sh   # a quick check that everything runs
#   BIG=1 scripts/bench_issue25.sh           # also `bench inject --memories 1000000` (SQLite)
#
# BASE (default c0d530d, the head before this session) is checked out once, detached, under
# $OUT/base and run with this checkout's virtual environment (PYTHONPATH puts its src/ first;
# the dependencies did not change). Each version has its own bench cache ($OUT/cache-base,
# $OUT/cache-new): the baseline builds the store of N memories once, the new code runs on a copy
# of it (migrated forward on open), so both search the same memories and the embedding of N
# texts is paid once. Order per command: baseline, new, baseline, new (REPEAT=2 by default):
# report the medians and the new/baseline ratio of each pair.
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
  name="$label-$(echo "$*" | tr ' ,/' '___')-$(date +%H%M%S).json"
  echo "== $label ($(git -C "$(dirname "$src")" rev-parse --short HEAD)): memlane $*" >&2
  local started=$SECONDS
  PYTHONPATH=$src MEMLANE_BENCH_CACHE=$OUT/cache-$label "$MEMLANE" "$@" --json >"$OUT/$name"
  echo "   $((SECONDS - started)) s -> $OUT/$name" >&2
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(d, indent=1)[:4000])' "$OUT/$name"
}

seed_new_cache() {  # the new code searches a copy of the baseline's store (built once)
  if [ ! -d "$OUT/cache-new" ] && [ -d "$OUT/cache-base" ]; then
    cp -a "$OUT/cache-base" "$OUT/cache-new"
  fi
}

# 1. inject, both backends in one run (a fresh store of N on each, built by the command itself)
for i in $(seq "$REPEAT"); do
  run base bench inject --memories "$N" --queries "$QUERIES" --backend sqlite,postgres --clients 1
  run new bench inject --memories "$N" --queries "$QUERIES" --backend sqlite,postgres --clients 1
done
# 2. the HTTP server against the same calls in-process, 1, 8 and 32 clients
run base bench inject --memories "$N" --queries 20  # builds the cached store of N once
seed_new_cache
for i in $(seq "$REPEAT"); do
  run base bench serve --memories "$N" --calls "$CALLS" --clients 1,8,32
  run new bench serve --memories "$N" --calls "$CALLS" --clients 1,8,32
done
# 3. one million memories (SQLite): building the store embeds 1,000,000 texts once (long)
if [ "${BIG:-0}" = 1 ]; then
  run base bench inject --memories 1000000 --queries "$QUERIES"
  seed_new_cache
  run new bench inject --memories 1000000 --queries "$QUERIES"
  run base bench inject --memories 1000000 --queries "$QUERIES"
  run new bench inject --memories 1000000 --queries "$QUERIES"
fi
