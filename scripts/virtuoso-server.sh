#!/usr/bin/env bash
# Virtuoso Open Source 7 (Debian's virtuoso-opensource-7-bin) as the peer of
# `nearflow bench serve --peer URL` and `nearflow bench shapes --peer virtuoso=URL`:
#   scripts/virtuoso-server.sh DATA_FILE [PORT]
# installs the package if it is missing, creates a database under .peers/ for DATA_FILE
# (Turtle/N-Triples, gzip recognised) and loads it with Virtuoso's bulk loader the first time,
# then serves SPARQL at http://127.0.0.1:PORT/sparql?default-graph-uri=urn:nearflow:peer (default
# PORT 8891; the graph holds the data, Virtuoso's default graph its system triples too) in the
# foreground; Ctrl-C or SIGTERM stops it. Both its ports (HTTP, and the SQL port PORT+1000 the loader uses) listen on
# loopback only. Its answers are capped at ResultSetMaxRows = 1,048,576 rows: an answer longer
# than that is cut, and a comparison must say so.
set -euo pipefail
cd "$(dirname "$0")/.."
data=${1:?usage: scripts/virtuoso-server.sh DATA_FILE [PORT]}
port=${2:-8891}
sql_port=$((port + 1000))
[ -f "$data" ] || { echo "virtuoso-server: $data: no such file" >&2; exit 1; }
scripts/apt-install.sh virtuoso-server virtuoso-opensource-7-bin >&2
data=$(realpath "$data")
dir=.peers/virtuoso-$(basename "$data" | tr -c 'A-Za-z0-9._-' _)
mkdir -p "$dir"
dir=$(realpath "$dir")
cat > "$dir/virtuoso.ini" <<EOF
[Database]
DatabaseFile = $dir/virtuoso.db
ErrorLogFile = $dir/virtuoso.log
LockFile = $dir/virtuoso.lck
TransactionFile = $dir/virtuoso.trx
xa_persistent_file = $dir/virtuoso.pxa
MaxCheckpointRemap = 2000

[TempDatabase]
DatabaseFile = $dir/virtuoso-temp.db
TransactionFile = $dir/virtuoso-temp.trx

[Parameters]
ServerPort = 127.0.0.1:$sql_port
DirsAllowed = ., $(dirname "$data"), $dir
NumberOfBuffers = 340000
MaxDirtyBuffers = 250000
ServerThreads = 20
CheckpointInterval = 0

[HTTPServer]
ServerPort = 127.0.0.1:$port
ServerRoot = $dir
ServerThreads = 20
MaxKeepAlives = 16
KeepAliveTimeout = 60

[SPARQL]
ResultSetMaxRows = 1048576
MaxQueryExecutionTime = 300
MaxQueryCostEstimationTime = 0
DefaultQuery = ASK { ?s ?p ?o }
EOF
sql() { isql-vt "$sql_port" dba dba "exec=$1" >/dev/null; }
virtuoso-t +foreground +configfile "$dir/virtuoso.ini" > "$dir/stdout.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null' EXIT INT TERM
for _ in $(seq 120); do
  sql "status();" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { echo "virtuoso-server: virtuoso-t exited; see $dir/virtuoso.log" >&2; exit 1; }
  sleep 1
done
sql "status();" || { echo "virtuoso-server: no answer on port $sql_port after 120 s" >&2; exit 1; }
if [ ! -f "$dir/loaded" ]; then
  echo "virtuoso-server: loading $data (once)" >&2
  sql "ld_dir('$(dirname "$data")', '$(basename "$data")', 'urn:nearflow:peer');"
  sql "rdf_loader_run();"
  sql "checkpoint;"
  errors=$(isql-vt "$sql_port" dba dba "exec=SELECT COUNT(*) FROM DB.DBA.LOAD_LIST WHERE ll_error IS NOT NULL;" | grep -E '^[0-9]+$' | head -1)
  [ "${errors:-1}" = 0 ] || { echo "virtuoso-server: the bulk load failed; see DB.DBA.LOAD_LIST in $dir" >&2; exit 1; }
  touch "$dir/loaded"
fi
# The data is in graph urn:nearflow:peer; Virtuoso's default graph also holds its own system
# triples, so a peer URL names the data's graph as the default one.
echo "virtuoso-server: serving $data at http://127.0.0.1:$port/sparql?default-graph-uri=urn:nearflow:peer (pid $pid)" >&2
wait "$pid"
