#!/usr/bin/env bash
# The whole test suite: formatting, clippy, every crate's tests (unit, behaviour, stress, CLI,
# doctests), the LD_PRELOAD allocator on real programs, the placement checks on this host and
# in a two-node QEMU guest, the loom models and Miri. Installs what it needs first.
#
# Every cargo command after the first test build selects the whole workspace (`--workspace
# --test NAME`, never `-p CRATE`): cargo resolves the dependencies' features over the packages
# it is asked for, so `-p` would compile DataFusion and most of the workspace again with
# another feature set. `cargo test --workspace` builds every binary and example as well.
#
# Each step's line says when it started ([mm:ss] since the start) and the last line says the
# total; cargo shows its own progress while it builds (the first build is most of the time:
# see docs/building.md for measured durations).
set -euo pipefail
cd "$(dirname "$0")"
START=$SECONDS
step() { printf '== [%02d:%02d] %s\n' $(((SECONDS - START) / 60)) $(((SECONDS - START) % 60)) "$*"; }
trap 'step "the test suite stopped here (exit status $?)"' ERR
scripts/deps.sh
rustup component add rustfmt clippy >/dev/null 2>&1 || true

step "cargo fmt --check"
cargo fmt --all -- --check
step "cargo clippy -D warnings (this builds the workspace: the longest wait of a first run)"
cargo clippy --workspace --all-targets --release -- -D warnings
# The product as `cargo install --path crates/cli` builds it: without the cluster feature,
# which the tests turn on (crates/cli's dev-dependencies).
cargo clippy --release -p nearflow-cli --lib --bins -- -D warnings
step "cargo doc -D warnings"
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps
step "cargo test (release: the stress tests count millions of tasks)"
# The property tests draw from a fixed seed so that a run is reproducible; set
# PROPTEST_RNG_SEED (and PROPTEST_CASES) to explore others.
export PROPTEST_RNG_SEED="${PROPTEST_RNG_SEED:-20261123}"
cargo test --workspace --release
step "the tests on ../shared/data (SP²Bench against Oxigraph, the README's counts, VWAP's file)"
# They are #[ignore]d, so that `cargo test` alone never passes them having checked nothing;
# here they run, and CI (.ci/run sets NEARFLOW_CI) fails when the data is missing.
if [ -d ../shared/data ]; then
  cargo test --release -q --workspace --test sp2bench --test generated --test apps --test cli -- --ignored
elif [ -n "${NEARFLOW_CI:-}" ]; then
  echo "FAILED: ../shared/data is missing; CI runs the tests that need it" >&2
  exit 1
else
  echo "SKIPPED: ../shared/data is absent here (CI fails on this): 6 tests did not run"
fi
step "the W3C SPARQL 1.1 and 1.2 query and update tests and the RDF 1.2 parser tests (../shared/w3c; crates/testsuite: the passed counts may only rise), the Protocol and Graph Store Protocol tests (crates/serve)"
if [ -d ../shared/w3c ]; then
  cargo test --release -q --workspace --test w3c -- --ignored --nocapture 2>&1 | grep -E "^W3C|passed|FAILED|panicked"
  cargo test --release -q --workspace --test w3c_protocol --test w3c_gsp -- --ignored --nocapture 2>&1 | grep -E "^W3C|passed|FAILED|panicked"
elif [ -n "${NEARFLOW_CI:-}" ]; then
  echo "FAILED: ../shared/w3c is missing; CI runs the W3C tests" >&2
  exit 1
else
  echo "SKIPPED: ../shared/w3c is absent here (CI fails on this)"
fi
step "the Python package (crates/python; scripts/python-test.sh): the wheel built by maturin, installed into a fresh virtual environment, pytest on its API, Arrow/pandas/polars answers and the rdflib store plugin"
scripts/python-test.sh
step "the endpoint's page in a real browser (headless Chromium from Debian): load it, run a query, page the table, read it back from the DOM; screenshot in results/serve-page.png"
scripts/apt-install.sh nearflow-tests chromium
cargo test --release -q --workspace --test browser -- --ignored
step "fuzz: the snapshot reader, a store's files (each damaged, removed, or swapped for an older copy or another store's), the RDF loaders (Turtle, N-Triples, N-Quads, TriG, RDF/XML, gzip) and the SPARQL front end (crates/sparql/tests/fuzz.rs); the parser's stack against the nesting bound (crates/sparql/tests/nesting.rs); the endpoint's request and Accept readers and random queries and updates sent over HTTP (crates/serve/tests/fuzz.rs)"
# Property-based, on stable Rust: damaged inputs, random deep/wide query shapes, and texts
# drawn to hide their depth from a tokenizer (the fuzz files are named fuzz.rs, the bound's
# nesting.rs). Briefly here; run longer with NEARFLOW_FUZZ_CASES=20000 (and another
# PROPTEST_RNG_SEED).
NEARFLOW_FUZZ_CASES="${NEARFLOW_FUZZ_CASES:-4096}" cargo test --release -q --workspace --test fuzz --test nesting
step "bench alloc on the allocbench programs (built by cargo test; run only here: plain cargo test ignores it)"
cargo test --release -q --workspace --test lab -- --ignored --exact bench_alloc_runs_every_allocator
step "the examples (crates/apps/examples), each on a small input; readme runs the Rust snippets of the README and docs/ (crates/apps/tests/readme.rs keeps them in step)"
cargo build --release --workspace --examples
for e in runtime custom_operator join allocator readme; do
  target/release/examples/"$e" 2000
done
step "the examples of the nearflow crate (crates/nearflow/examples): join, scope, parallel iterators, nested waits"
target/release/examples/quicksort 200000
for e in scope par_iter nested; do
  target/release/examples/"$e" >/dev/null
done
step "the LD_PRELOAD allocator runs real programs (scripts/preload-test.sh)"
scripts/preload-test.sh
step "allocator placement on this host and on two NUMA nodes in a QEMU guest (scripts/numa-vm-test.sh)"
target/release/nearflow check placement
scripts/numa-vm-test.sh target/release/nearflow
step "loom models of sleep/wake (crates/rt/src/sleep/README.md), the join latch (crates/rt/src/join.rs), the task blocks' return stacks (crates/rt/src/task.rs), the operator states (crates/flow/src/state.rs), backpressure (crates/flow/src/channel.rs) and the recollection bins (crates/alloc/src/bin.rs)"
# Preemption bound 2, as tokio's CI does: the unbounded search of the two-worker models takes
# hours on 2 cores; bound 2 explores every interleaving with at most two forced preemptions.
LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-2}" RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom \
  cargo test -p nearflow-rt -p nearflow-flow -p nearflow-alloc --release --lib loom
step "miri over the runtime's and the allocator's unsafe code (scripts/miri.sh)"
if cargo +nightly miri --version >/dev/null 2>&1; then
  scripts/miri.sh
else
  echo "SKIPPED: the nightly toolchain with miri is not installed here"
  echo "         (rustup component add --toolchain nightly miri rust-src; then scripts/miri.sh)"
fi
step "done: the whole suite passed"
