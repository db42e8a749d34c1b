#!/usr/bin/env bash
# A nearflow cluster on this machine, and SP²Bench's 17 queries through it against one process:
#   scripts/local-cluster.sh [--data FILE] [--shards S] [--workers W[,W…]] [--rounds R] [--dir DIR]
# builds the `nearflow` binary with the cluster (`--features cluster`), loads FILE (default: ../shared/data/sp2bench/sp2b-250000.n3.gz)
# into one store and into a folder of S shards by subject (default 4; both kept in DIR, default
# .peers/cluster, and reused while FILE is unchanged), then for each W (default 2) starts W
# workers (`nearflow worker`) on free loopback ports and runs R rounds (default 3): in each,
# every query through one process (`sparql --store`), then through the cluster (`sparql
# --cluster`), each count checked against the other. Prints, per W and query, the median time
# of each (the query's time as `--explain` reports it: planning and running, after the store
# is open), their ratio, and the cluster's rows from the workers and the time fetching them.
# The workers are stopped by PID when it ends, whatever way it ends; a query has 600 s.
#
# While it runs (or with --keep, after) the workers answer any query by hand:
#   nearflow sparql --store DIR/cluster-S --cluster 127.0.0.1:PORT,… -e 'SELECT …'
set -euo pipefail
cd "$(dirname "$0")/.."
data=../shared/data/sp2bench/sp2b-250000.n3.gz
shards=4
workers=2
rounds=3
dir=.peers/cluster
keep=0
while [ $# -gt 0 ]; do
  case $1 in
    --data) data=$2; shift 2 ;;
    --shards) shards=$2; shift 2 ;;
    --workers) workers=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --dir) dir=$2; shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done
say() { echo "local-cluster: $*" >&2; }
[ -f "$data" ] || { say "no data file $data (give one with --data)"; exit 1; }
queries=../shared/data/sp2bench/queries
[ -d "$queries" ] || { say "no SP²Bench queries in $queries"; exit 1; }
say "building nearflow with the cluster (--features cluster: the first build takes a while, DataFusion with it)"
cargo build --release --quiet -p nearflow-cli --features cluster >&2
bin=$PWD/target/release/nearflow
mkdir -p "$dir"
stamp="$(realpath "$data") $(stat -c '%s %Y' "$data") $shards"
if [ "$(cat "$dir/loaded" 2>/dev/null)" != "$stamp" ]; then
  rm -rf "$dir/one.store" "$dir/one.store".* "$dir/cluster-$shards" "$dir/loaded"
  say "loading $data into one store and into $shards shards"
  "$bin" load "$data" --save "$dir/one.store" --quiet
  "$bin" load "$data" --save "$dir/cluster-$shards" --shards "$shards" --quiet
  echo "$stamp" >"$dir/loaded"
fi
pids=()
stop_workers() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
}
trap stop_workers EXIT
# Starts N workers on free ports; sets $list to their addresses.
start_workers() {
  local n=$1 i addr
  list=""
  for i in $(seq "$n"); do
    "$bin" worker "$dir/cluster-$shards" --listen 127.0.0.1:0 2>"$dir/worker-$i.log" &
    pids+=($!)
    addr=""
    for _ in $(seq 300); do
      addr=$(sed -n 's/.* listening on \([0-9.:]*\) .*/\1/p' "$dir/worker-$i.log")
      [ -n "$addr" ] && break
      kill -0 "${pids[-1]}" 2>/dev/null || break
      sleep 0.1
    done
    [ -n "$addr" ] || { say "worker $i did not start:"; cat "$dir/worker-$i.log" >&2; exit 1; }
    list="${list:+$list,}$addr"
  done
}
# One run: prints "COUNT SECONDS FETCHED_ROWS FETCH_SECONDS".
run() {
  local out
  out=$(timeout 600 "$bin" sparql "$@" --count --explain --quiet 2>&1) || {
    say "failed: nearflow sparql $*"; echo "$out" >&2; exit 1; }
  local count secs rows fetch
  count=$(echo "$out" | head -1)
  secs=$(echo "$out" | sed -n 's/^[0-9]* results in \([0-9.]*\) s.*/\1/p')
  rows=$(echo "$out" | sed -n 's/^cluster: .*, \([0-9]*\) rows from the workers in \([0-9.]*\) s/\1 \2/p')
  echo "$count $secs ${rows:-- -}"
}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
tmp=$(mktemp -d)
trap 'stop_workers; rm -rf "$tmp"' EXIT
printf 'workers\tshards\tquery\tcount\tone process s\tcluster s\tratio\trows fetched\tfetch s\n'
IFS=, read -ra ws <<<"$workers"
for w in "${ws[@]}"; do
  start_workers "$w"
  say "$w workers on $list, $shards shards, $rounds rounds"
  for r in $(seq "$rounds"); do
    for q in "$queries"/*.sparql; do
      name=$(basename "$q" .sparql)
      read -r c1 s1 _ _ <<<"$(run --store "$dir/one.store" --query "$q")"
      read -r c2 s2 rows fetch <<<"$(run --store "$dir/cluster-$shards" --cluster "$list" --query "$q")"
      if [ "$c1" != "$c2" ]; then
        say "$name: the cluster counted $c2, one process $c1"; exit 1
      fi
      echo "$c1" >"$tmp/$name.count"
      echo "$s1" >>"$tmp/$name.one"
      echo "$s2" >>"$tmp/$name.cluster"
      echo "$rows $fetch" >>"$tmp/$name.fetch"
    done
  done
  for q in "$queries"/*.sparql; do
    name=$(basename "$q" .sparql)
    one=$(median <"$tmp/$name.one")
    cl=$(median <"$tmp/$name.cluster")
    fetch=$(awk '{print $2}' "$tmp/$name.fetch" | median)
    rows=$(head -1 "$tmp/$name.fetch" | awk '{print $1}')
    ratio=$(awk -v a="$cl" -v b="$one" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$shards" "$name" \
      "$(cat "$tmp/$name.count")" "$one" "$cl" "$ratio" "$rows" "$fetch"
    rm -f "$tmp/$name".*
  done
  if [ "$keep" = 1 ]; then
    say "workers left running on $list (PIDs ${pids[*]}): query them with"
    say "  $bin sparql --store $dir/cluster-$shards --cluster $list -e 'SELECT …'"
    trap 'rm -rf "$tmp"' EXIT
    exit 0
  fi
  stop_workers
done
