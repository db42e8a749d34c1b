#!/usr/bin/env bash
# Placement checks on two NUMA nodes, in a QEMU guest under software emulation (TCG), so they
# run on any machine (our developer and CI machines have one node).
#
# The guest: Debian's cloud kernel, 2 CPUs and 2 × 512 MiB in two NUMA nodes
# (-numa node,cpus=0,memdev=m0 -numa node,cpus=1,memdev=m1), and an initramfs holding busybox,
# the `nearflow` binary with its shared libraries, and an /init that runs
#   nearflow topo --json         → must report 2 NUMA nodes and 2 core groups (one per node)
#   nearflow check placement     → superblocks of a thread on each node are on that node,
#                                  SplittableData partitions are on their nodes and dispatched
#                                  tasks run where the runtime counts them,
#                                  allocate-on-node places pages on each node (and refuses node 2),
#                                  a block of a node-1 thread freed on node 0 returns to its
#                                  owner on node 1, the runtime's workers run on their node,
#                                  a replicated store's copies are on their nodes and a query
#                                  reads its workers' own
#   nearflow bench split         → plain and split ferret search answer alike; prints the remote
#                                  shares and Fig. 3 categories on two (emulated) nodes
#   nearflow bench numa-factor   → runs; its timings are labelled emulated
#   nearflow bench sp2bench      → on a generated document, with the store partitioned and
#                                  replicated: the index reads from the other node's memory
# then powers off. The host side reads the guest's console and fails unless every check passed.
#
# Needs (installed when missing): qemu-system-x86 linux-image-cloud-amd64 busybox-static cpio.
# Usage: scripts/numa-vm-test.sh [path/to/nearflow]   (default: builds target/release/nearflow)
# The guest gets `nearflow` and the `nearflow-lab` beside it (the experiments it runs).
set -euo pipefail
cd "$(dirname "$0")/.."

need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list 2>/dev/null | grep -qx poweroff || need+=(busybox-static)
command -v cpio >/dev/null || need+=(cpio)
ls /boot/vmlinuz-*-cloud-amd64 >/dev/null 2>&1 || need+=(linux-image-cloud-amd64)
if [ ${#need[@]} -gt 0 ]; then
  scripts/apt-install.sh numa-vm-test "${need[@]}"
fi
kernel=$(ls /boot/vmlinuz-*-cloud-amd64 | sort -V | tail -1)
if [ ! -r "$kernel" ]; then
  echo "numa-vm-test: cannot read $kernel" >&2
  exit 1
fi

bin=${1:-}
if [ -z "$bin" ]; then
  cargo build --release -p nearflow-cli -p nearflow-lab-cli
  bin=target/release/nearflow
fi
lab=$(dirname "$bin")/nearflow-lab
if [ ! -x "$lab" ]; then
  echo "numa-vm-test: $lab is missing (cargo build --release -p nearflow-lab-cli)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,usr/bin}
cp /bin/busybox "$root/bin/busybox"
for app in sh mount poweroff cat echo grep tr sleep uname; do
  ln -s busybox "$root/bin/$app"
done
# Without their debug information: the guest unpacks them into its 1 GiB of memory.
objcopy --strip-debug "$bin" "$root/bin/nearflow"
objcopy --strip-debug "$lab" "$root/bin/nearflow-lab"
# The binaries' shared libraries (hwloc, udev, libc, the loader) at their own paths.
{ ldd "$bin"; ldd "$lab"; } | grep -o '/[^ ]*' | sort -u | while read -r lib; do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done

cat > "$root/init" <<'EOF'
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev 2>/dev/null
echo "NEARFLOW-VM: kernel $(uname -r), $(cat /sys/devices/system/node/online) online nodes"
ok=1
nearflow topo --json > /tmp/topo.json 2>/tmp/topo.err || { cat /tmp/topo.err; ok=0; }
flat=$(tr -d ' \n' < /tmp/topo.json)
if echo "$flat" | grep -q '"numa_nodes":2' && echo "$flat" | grep -q '"core_group_nodes":\[0,1\]'; then
  echo "NEARFLOW-VM: PASS topo --json reports 2 NUMA nodes and 2 core groups (nodes 0 and 1)"
else
  echo "NEARFLOW-VM: FAIL topo --json:"; cat /tmp/topo.json; ok=0
fi
nearflow topo
if nearflow check placement; then
  echo "NEARFLOW-VM: PASS check placement"
else
  echo "NEARFLOW-VM: FAIL check placement"; ok=0
fi
# SplittableData on two nodes: the remote share and Fig. 3's categories of plain against split,
# and the NUMA factors (emulated: TCG timings are meaningless, the shares are not).
if nearflow bench split --points 5000 --dim 16 --queries 200 --reps 1 --check-queries 20 \
     --policies las,nls > /tmp/split.txt 2>&1; then
  echo "NEARFLOW-VM: PASS bench split (every answer equal to the plain search)"
else
  echo "NEARFLOW-VM: FAIL bench split"; ok=0
fi
sed 's/^/NEARFLOW-VM-OUT split: /' /tmp/split.txt
if nearflow bench numa-factor --mib 16 --reps 1 > /tmp/nf.txt 2>&1; then
  echo "NEARFLOW-VM: PASS bench numa-factor"
else
  echo "NEARFLOW-VM: FAIL bench numa-factor"; ok=0
fi
sed 's/^/NEARFLOW-VM-OUT numa-factor: /' /tmp/nf.txt
# The store's two placements on two nodes: SP²Bench on a generated document,
# the index reads each query makes from the other node's memory, partitioned and replicated.
if nearflow gen sp2bench --triples 20000 --out /tmp/sp.n3 --quiet; then
  for pl in partitioned replicated; do
    if nearflow bench sp2bench --data /tmp/sp.n3 --store-placement $pl --concurrent 1 --reps 1 \
         > /tmp/sp2b.txt 2>&1; then
      echo "NEARFLOW-VM: PASS bench sp2bench --store-placement $pl"
    else
      echo "NEARFLOW-VM: FAIL bench sp2bench --store-placement $pl"; ok=0
    fi
    grep -v "×1:" /tmp/sp2b.txt | sed "s/^/NEARFLOW-VM-OUT sp2bench $pl: /"
  done
else
  echo "NEARFLOW-VM: FAIL gen sp2bench"; ok=0
fi
echo "NEARFLOW-VM-RESULT ok=$ok"
poweroff -f
EOF
chmod +x "$root/init"
(cd "$root" && find . | cpio -o -H newc --quiet | gzip -1) > "$work/initrd.gz"

echo "numa-vm-test: booting $kernel with 2 NUMA nodes (TCG; takes a minute or two)"
log=$work/console.log
set +e
timeout 600 qemu-system-x86_64 \
  -accel tcg -cpu max -smp 2 -m 1024 -nographic -no-reboot \
  -object memory-backend-ram,id=m0,size=512M -object memory-backend-ram,id=m1,size=512M \
  -numa node,nodeid=0,cpus=0,memdev=m0 -numa node,nodeid=1,cpus=1,memdev=m1 \
  -kernel "$kernel" -initrd "$work/initrd.gz" \
  -append "console=ttyS0 rdinit=/init quiet panic=-1 oops=panic" \
  > "$log" 2>&1
rc=$?
set -e
# The console's terminal control codes (the firmware's screen clear, line wrap off) and
# carriage returns are the serial line's, not the guest's output: removed before printing.
clean() { sed -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1b[c()][0-9A-Za-z]\?//g' -e 's/\r//g' "$@"; }
clean "$log" | grep -E "NEARFLOW|PASS|FAIL|error" || true
if [ $rc -ne 0 ]; then
  echo "numa-vm-test: qemu exited with $rc; console log:" >&2
  clean "$log" | tail -40 >&2
  exit 1
fi
if grep -q "NEARFLOW-VM-RESULT ok=1" "$log"; then
  echo "numa-vm-test: all placement checks passed on 2 NUMA nodes"
else
  echo "numa-vm-test: FAILED" >&2
  clean "$log" | tail -60 >&2
  exit 1
fi
