#!/usr/bin/env bash
# The LD_PRELOAD library (crates/malloc) runs real programs: python3 with threads and large
# buffers, `ls -R /usr`, sort and gzip round trips. Each must give the same output as without
# the library, and NEARFLOW_MALLOC_STATS must show that the library served blocks.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v python3 >/dev/null || scripts/apt-install.sh preload-test python3
cargo build --profile preload -q -p nearflow-malloc
lib=$PWD/target/preload/libnearflow_malloc.so
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# A few block sizes per thread: each size a thread uses holds a 10 MB superblock (§5), so a
# script spreading buffers over all 62 sizes from 8 threads would hold gigabytes.
py='
import threading, hashlib, json
def work(i, out):
    bufs = [bytearray((8192, 20000, 65536, 300000)[k % 4] + k) for k in range(300)]
    for k, b in enumerate(bufs):
        b[0] = k % 251
    out[i] = sum(b[0] for b in bufs) + len(json.dumps(list(range(20000 + i))))
out = {}
ts = [threading.Thread(target=work, args=(i, out)) for i in range(8)]
[t.start() for t in ts]; [t.join() for t in ts]
print(sorted(out.items()), hashlib.sha256(bytes(600000)).hexdigest())
'
want=$(python3 -c "$py")
got=$(NEARFLOW_MALLOC_STATS=1 LD_PRELOAD="$lib" python3 -c "$py" 2>"$tmp/stats")
[ "$got" = "$want" ] || { echo "preload: python3 output differs" >&2; exit 1; }
grep -q "nearflow-malloc: [1-9][0-9]* superblocks" "$tmp/stats" \
  || { echo "preload: python3 did not allocate from the library:" >&2; cat "$tmp/stats" >&2; exit 1; }
echo "preload: python3 (8 threads, 8–300 KiB buffers): same output; $(tail -1 "$tmp/stats")"
got=$(NEARFLOW_SUPERBLOCK_KB=2048 NEARFLOW_MALLOC_STATS=1 LD_PRELOAD="$lib" python3 -c "$py" 2>"$tmp/stats")
[ "$got" = "$want" ] || { echo "preload: python3 output differs with 2 MiB superblocks" >&2; exit 1; }
grep -q " MiB mapped" "$tmp/stats" || { cat "$tmp/stats" >&2; exit 1; }
echo "preload: the same with NEARFLOW_SUPERBLOCK_KB=2048: $(tail -1 "$tmp/stats")"

ls -R /usr > "$tmp/ls.want" 2>/dev/null || true
LD_PRELOAD="$lib" ls -R /usr > "$tmp/ls.got" 2>/dev/null || true
cmp -s "$tmp/ls.want" "$tmp/ls.got" || { echo "preload: ls -R /usr output differs" >&2; exit 1; }
echo "preload: ls -R /usr: same $(wc -l < "$tmp/ls.got") lines"

seq 1 300000 | sort -R --random-source=<(yes) > "$tmp/shuf"
want=$(sort -n "$tmp/shuf" | sha256sum)
got=$(LD_PRELOAD="$lib" sort -n -S 64M "$tmp/shuf" | sha256sum)
[ "$got" = "$want" ] || { echo "preload: sort output differs" >&2; exit 1; }
LD_PRELOAD="$lib" gzip -c "$tmp/shuf" | LD_PRELOAD="$lib" gzip -dc | cmp -s - "$tmp/shuf" \
  || { echo "preload: gzip round trip differs" >&2; exit 1; }
echo "preload: sort -n of 300,000 lines and a gzip round trip: same output"

# The C allocator contract (scripts/malloc-contract.c): huge sizes, errno, alignments, calloc,
# the same on glibc and under the library, line for line.
cc -O1 -Wall -Wno-use-after-free -Wno-alloc-size-larger-than -o "$tmp/contract" scripts/malloc-contract.c
"$tmp/contract" > "$tmp/contract.glibc"
LD_PRELOAD="$lib" "$tmp/contract" > "$tmp/contract.nearflow" \
  || { echo "preload: the contract program failed under the library (exit $?)" >&2; exit 1; }
diff "$tmp/contract.glibc" "$tmp/contract.nearflow" >&2 \
  || { echo "preload: the C allocator contract differs from glibc's (above: < glibc, > nearflow)" >&2; exit 1; }
echo "preload: the C allocator contract: $(wc -l < "$tmp/contract.glibc") calls answer as glibc's do"
