#!/usr/bin/env bash
# Oxigraph's own SPARQL server as the peer of `nearflow bench serve --peer URL` and
# `nearflow bench shapes --peer oxigraph=URL`:
#   scripts/oxigraph-server.sh DATA_FILE [PORT]
# installs Oxigraph's server from PyPI once (the `oxigraph` package, a prebuilt wheel of
# oxigraph-cli, version OXIGRAPH_VERSION, default 0.5.13, into the virtual environment
# .peers/oxigraph-venv), loads DATA_FILE (Turtle/N-Triples, gzip recognised) into a fresh store
# under .peers/, and serves it read-only on 127.0.0.1:PORT (default 7879) in the foreground;
# Ctrl-C or SIGTERM stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:?usage: scripts/oxigraph-server.sh DATA_FILE [PORT]}
port=${2:-7879}
version=${OXIGRAPH_VERSION:-0.5.13}
[ -f "$data" ] || { echo "oxigraph-server: $data: no such file" >&2; exit 1; }
venv=.peers/oxigraph-venv
bin=$venv/bin/oxigraph
if [ ! -x "$bin" ] || ! "$bin" --version 2>/dev/null | grep -qx "oxigraph $version"; then
  rm -rf "$venv"
  if ! python3 -m venv "$venv" >/dev/null 2>&1; then
    # Debian's python3 makes virtual environments with its python3-venv package.
    scripts/apt-install.sh oxigraph-server python3-venv >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
  fi
  echo "oxigraph-server: installing oxigraph $version from PyPI" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check "oxigraph==$version" >&2
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
