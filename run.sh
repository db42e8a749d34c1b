#!/usr/bin/env bash
# The main job on embedded defaults: this machine's topology, SP²Bench at 250k triples beside
# Oxigraph (the original document from ../shared, or one of ours generated first), the SPARQL
# endpoint (`nearflow serve`'s) under 16 HTTP clients with LAS and NLS (each also beside an
# update stream of 10 updates/s on a durable copy of the store), a VWAP run on
# generated data, the concurrent-plans comparison with the nearflow and the system allocator,
# the placement checks, a short ferret search, plain against SplittableData, the allocator
# benchmark (latency, pipeline), then the queue study (load-balancing-queues.txt) at sizes
# 128..2048. Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")"
scripts/deps.sh
echo "== building nearflow and nearflow-lab (release): the first build is the long part (see the README for measured durations); cargo shows its progress"
START=$SECONDS
cargo build --release -p nearflow-cli -p nearflow-lab-cli -p nearflow-allocbench
echo "== built in $((SECONDS - START)) s; the demo starts (each step prints the command that reruns it)"
exec target/release/nearflow-lab demo "$@"
