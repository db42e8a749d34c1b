#!/usr/bin/env bash
# Miri over the runtime's unsafe code and data races (crates/rt/tests/miri.rs).
# - Tree Borrows: crossbeam-epoch (under crossbeam-deque) is not compatible with Stacked Borrows
#   but is with Tree Borrows; crossbeam's own CI runs Miri this way (crossbeam-rs/crossbeam#996).
# - ignore-leaks: crossbeam-epoch's process-wide default collector is never freed by design. The
#   test checks nearflow's own leaks itself (`nearflow_rt::live_requests() == 0`).
# Not part of ./test.sh: it needs the nightly toolchain with the miri component
#   rustup component add --toolchain nightly miri rust-src
set -euo pipefail
cd "$(dirname "$0")/.."
MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks -Zmiri-permissive-provenance ${MIRIFLAGS:-}" \
  cargo +nightly miri test -p nearflow-rt --test miri "$@"
