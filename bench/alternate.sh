#!/usr/bin/env bash
# Compare search latency of another revision with this working tree on a machine that drifts: run
# bench/search.py of each alternately, RUNS times each, on the same data, and print every run's
# second passes (docs/benchmarks.md reports the medians of the runs' medians).
#
#   bench/alternate.sh REV [RUNS]          # SQLite: var/bench/search.sqlite3 of this checkout
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/buddy_bench_search bench/alternate.sh REV [RUNS]
#
# REV is checked out once as a git worktree under var/bench/ (its bench/search.py reads the same
# database: build it first with this checkout's bench/search.py). Extra arguments for bench/search.py
# go in SEARCH_ARGS (default: semantic search too, no LIKE baseline, no bound comparison).
set -euo pipefail
cd "$(dirname "$0")/.."

rev="${1:?usage: bench/alternate.sh REV [RUNS]}"
runs="${2:-3}"
sha="$(git rev-parse --short "$rev")"
tree="var/bench/alternate-$sha"
export DATABASE_URL="${DATABASE_URL:-sqlite:///$PWD/var/bench/search.sqlite3}"
read -r -a args <<< "${SEARCH_ARGS:---semantic --like-queries 0 --bound-queries 0}"

if [ ! -d "$tree" ]; then
  git worktree prune  # a worktree deleted by hand stays registered until pruned
  git worktree add --detach "$tree" "$sha" >/dev/null
fi
for run in $(seq "$runs"); do
  for code in "$sha" "working tree"; do
    script="bench/search.py"
    [ "$code" = "$sha" ] && script="$tree/bench/search.py"
    echo "=== $code, run $run of $runs ($(date +%T))"
    .venv/bin/python "$script" "${args[@]}" | grep "second pass"
  done
done
