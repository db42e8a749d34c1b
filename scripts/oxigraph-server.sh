#!/usr/bin/env bash
# Oxigraph's own SPARQL server as the peer of `nearflow bench serve --peer URL` and
# `nearflow bench shapes --peer oxigraph=URL`:
#   scripts/oxigraph-server.sh DATA_FILE [PORT]
# builds `oxigraph-cli` from crates.io once (into .peers/oxigraph, RocksDB compiled from the
# crate's bundled sources: Debian 12's librocksdb is older than the 9.10 it needs), loads
# DATA_FILE (Turtle/N-Triples, gzip recognised) into a fresh store under .peers/, and serves it
# on 127.0.0.1:PORT (default 7879) in the foreground; Ctrl-C or SIGTERM stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:?usage: scripts/oxigraph-server.sh DATA_FILE [PORT]}
port=${2:-7879}
[ -f "$data" ] || { echo "oxigraph-server: $data: no such file" >&2; exit 1; }
bin=.peers/oxigraph/bin/oxigraph
if [ ! -x "$bin" ]; then
  scripts/apt-install.sh oxigraph-server clang libclang-dev >&2
  echo "oxigraph-server: building oxigraph-cli (RocksDB from source: several minutes, once)" >&2
  CARGO_TARGET_DIR=.peers/target cargo install --locked --quiet oxigraph-cli --root .peers/oxigraph >&2
fi
store=.peers/store-$(basename "$data" | tr -c 'A-Za-z0-9._-' _)
if [ ! -d "$store" ]; then
  tmp="$store.tmp"
  rm -rf "$tmp"
  case "$data" in
    *.gz) gunzip -c "$data" | "$bin" load --location "$tmp" --format ttl ;;
    *.nt) "$bin" load --location "$tmp" --file "$data" --format nt ;;
    *) "$bin" load --location "$tmp" --file "$data" --format ttl ;;
  esac
  # As Oxigraph's loader advises for a read-heavy workload.
  "$bin" optimize --location "$tmp"
  mv "$tmp" "$store"
fi
echo "oxigraph-server: http://127.0.0.1:$port/query ($data)" >&2
exec "$bin" serve-read-only --location "$store" --bind "127.0.0.1:$port"
