#!/usr/bin/env bash
# Miri over nearflow's unsafe code and data races.
#
# 1. The runtime (crates/rt/tests/miri.rs), with join, scope and a wait inside a task:
#    - Tree Borrows: crossbeam-epoch (under crossbeam-deque) is not compatible with Stacked
#      Borrows but is with Tree Borrows; crossbeam's own CI runs Miri this way
#      (crossbeam-rs/crossbeam#996).
#    - ignore-leaks: crossbeam-epoch's process-wide default collector is never freed by design.
#      The test checks nearflow's own leaks itself (`nearflow_rt::live_requests() == 0`).
# 2. The allocator's single-threaded core plus one foreign free (crates/alloc/src/lib.rs,
#    `core_tests`), under the default Stacked Borrows, with the OS layer on std::alloc::System:
#    - ignore-leaks: an allocator instance, its local allocators, address-map leaves and cached
#      superblocks live as long as the process by design. The test checks the allocator's own
#      accounting (every block back with its owner, at most two empty superblocks kept).
#    - permissive provenance: the test keeps block addresses as integers.
# Run by ./test.sh when the nightly toolchain has the miri component:
#   rustup component add --toolchain nightly miri rust-src
set -euo pipefail
cd "$(dirname "$0")/.."
MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks -Zmiri-permissive-provenance ${MIRIFLAGS:-}" \
  cargo +nightly miri test -p nearflow-rt --test miri "$@"
# The queues' own tests: the deferred queue's lock-free inbox with three producers.
MIRIFLAGS="-Zmiri-tree-borrows -Zmiri-ignore-leaks -Zmiri-permissive-provenance ${MIRIFLAGS:-}" \
  cargo +nightly miri test -p nearflow-rt --lib queue::tests "$@"
# The task blocks' recycling (crates/rt/src/task.rs): a task's block reused, sent to its owner,
# freed past the caps; tasks dropped unrun. Leaks are checked here (no crossbeam-epoch involved).
MIRIFLAGS="${MIRIFLAGS:-}" cargo +nightly miri test -p nearflow-rt --lib task::tests "$@"
MIRIFLAGS="-Zmiri-ignore-leaks -Zmiri-permissive-provenance ${MIRIFLAGS:-}" \
  cargo +nightly miri test -p nearflow-alloc --lib core_tests "$@"
# The parallel iterators' owned `Vec` drain (crates/par/src/sources.rs): items moved out or
# dropped once however much of a piece is consumed.
MIRIFLAGS="${MIRIFLAGS:-}" cargo +nightly miri test -p nearflow-par --lib "$@"
