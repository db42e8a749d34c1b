#!/usr/bin/env bash
# The measurement behind the choice of the distributed engine (docs/cluster.md):
#   scripts/engine-choice.sh [ROWS[,ROWS…]] [ROUNDS]
# builds bench/engine-choice (DataFusion 55, datafusion-distributed 4 and Ballista 55 from
# crates.io: about 25 minutes on 2 cores, once, into .peers/target), writes two Parquet tables
# of ROWS rows each per size (default 4000000,16000000) under .peers/engine-choice/, starts two
# datafusion-distributed workers and a Ballista scheduler with two executors (one vcore each)
# on loopback, and runs ROUNDS (default 3) interleaved rounds: in each, per size, DataFusion in
# one process, then datafusion-distributed, then Ballista, each query 5 times (median, min, max
# in ms, and the count). Then the routing test: the rows of a's first task are scanned by the
# worker a route-tasks handler of ours names, not by the one the engine would choose. Then
# the fault test: an executor (a worker) is killed 0.5 s into a
# join, and what the query ended with is printed. Every process it starts is stopped by PID
# when it ends, whatever way it ends.
set -euo pipefail
cd "$(dirname "$0")/.."
sizes=${1:-4000000,16000000}
rounds=${2:-3}
bin=.peers/target/release/engine-choice
echo "engine-choice: building bench/engine-choice (about 25 minutes the first time)" >&2
CARGO_TARGET_DIR=$PWD/.peers/target cargo build --release --locked --quiet \
  --manifest-path bench/engine-choice/Cargo.toml >&2
data=.peers/engine-choice
mkdir -p "$data"
pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop EXIT
start() { "$bin" "$@" >>"$data/servers.log" 2>&1 & pids+=($!); }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
wait_port() {
  for _ in $(seq 100); do port_open "$1" && return 0; sleep 0.1; done
  echo "engine-choice: nothing listens on port $1 after 10 s (see $data/servers.log)" >&2
  exit 1
}
for p in 7101 7102 50050 7201 7211; do
  if port_open $p; then echo "engine-choice: port $p is in use" >&2; exit 1; fi
done
: >"$data/servers.log"
start dd-worker 7101
start dd-worker 7102
start b-scheduler 50050
wait_port 50050
mkdir -p "$data/work1" "$data/work2"
start b-executor 50050 7201 "$data/work1"
start b-executor 50050 7211 "$data/work2"
wait_port 7101; wait_port 7102; wait_port 7201; wait_port 7211
sleep 1
for n in ${sizes//,/ }; do
  [ -d "$data/rows-$n/a" ] || { rm -rf "$data/rows-$n"; "$bin" gen "$data/rows-$n" "$n"; }
done
echo -e "round\trows\tengine\tquery\tmedian_ms\tmin_ms\tmax_ms\tcount"
for r in $(seq "$rounds"); do
  for n in ${sizes//,/ }; do
    d=$data/rows-$n
    for run in "local $d 5" "dd-run $d 7101,7102 5" "b-run $d 50050 5"; do
      timeout 300 "$bin" $run | sed "s|^|$r\t$n\t|"
    done
  done
done
echo "routing: which worker scanned the rows of a's task 0 (first = 1), routed by our handler to the"
echo "second worker, and by the engine's own routing; 3 runs each"
echo -e "routing\trun\tworker\tfirst_v\tlast_v\trows"
"$bin" dd-where "$data/rows-${sizes%%,*}" 7101,7102 3 | sed 's/\t| /\t/; s/ *| */\t/g; s/\t$//'
n=${sizes##*,}
echo "fault test, $n rows: a worker killed 0.5 s into the join"
timeout 120 "$bin" dd-once "$data/rows-$n" 7101,7102 | sed 's|^|datafusion-distributed\t|' &
q=$!; sleep 0.5; kill "${pids[1]}"; wait $q || true
timeout 120 "$bin" b-once "$data/rows-$n" 50050 | sed 's|^|ballista\t|' &
q=$!; sleep 0.5; kill "${pids[4]}"; wait $q || true
