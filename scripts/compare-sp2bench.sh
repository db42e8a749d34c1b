#!/usr/bin/env bash
# Two builds, or two stores, side by side on SP²Bench: `bench sp2bench` of each, alternated,
# ROUNDS rounds with the order reversed every round; per query, the median over the rounds of
# B's time over A's in the same round, and the range. Every query's row count must agree
# across all runs.
#
# Usage: scripts/compare-sp2bench.sh A_BIN B_BIN STORE [ROUNDS] [B_STORE]
#   A_BIN, B_BIN: binaries that have `bench sp2bench` (nearflow-lab, or an older nearflow)
#   STORE: a snapshot (`nearflow load DATA --save STORE`); run from the checkout, so that
#          ../shared/data/sp2bench/queries gives the original queries.
#   B_STORE: the snapshot B reads (default: STORE), e.g. the same data in another format.
#   QUERIES (environment): the queries, comma-separated (default: all 17).
#   REPS (environment): repetitions of each query in one run, their median taken (default 1;
#          3 or more measures warm times, past the first reads of the store).
set -euo pipefail
a=$1 b=$2 store=$3 rounds=${4:-9} store_b=${5:-$3} reps=${REPS:-1}
q=${QUERIES:-q1,q2,q3a,q3b,q3c,q4,q5a,q5b,q6,q7,q8,q9,q10,q11,q12a,q12b,q12c}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for r in $(seq 1 "$rounds"); do
  if [ $((r % 2)) -eq 1 ]; then order="a b"; else order="b a"; fi
  for w in $order; do
    bin=$a st=$store; [ "$w" = b ] && bin=$b st=$store_b
    "$bin" bench sp2bench --store "$st" --queries $q --concurrent 1 --reps "$reps" --policies las \
      --quiet --csv "$out/$w-$r.csv" > /dev/null
  done
  echo "round $r of $rounds" >&2
done
python3 - "$out" <<'PY'
import csv, glob, statistics, sys
out = sys.argv[1]
def load(w):
    d = {}
    for f in sorted(glob.glob(f"{out}/{w}-*.csv"), key=lambda f: int(f.rsplit("-", 1)[1][:-4])):
        for row in csv.DictReader(open(f)):
            d.setdefault(row["query"], []).append((float(row["seconds"]), row["rows"]))
    return d
a, b = load("a"), load("b")
print("| query | rows | A (ms) | B (ms) | B/A (median of rounds) | range over the rounds |")
print("|---|---:|---:|---:|---:|---|")
for q in a:
    if {x[1] for x in a[q]} != {x[1] for x in b[q]} or len({x[1] for x in a[q]}) != 1:
        sys.exit(f"{q}: row counts differ: {a[q]} {b[q]}")
    ta, tb = [x[0] for x in a[q]], [x[0] for x in b[q]]
    r = sorted(y / x for x, y in zip(ta, tb))
    print(f"| {q} | {a[q][0][1]} | {statistics.median(ta)*1e3:.1f} | {statistics.median(tb)*1e3:.1f} "
          f"| {statistics.median(r):.2f} | {r[0]:.2f}–{r[-1]:.2f} |")
PY
