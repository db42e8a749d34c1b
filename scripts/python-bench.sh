#!/usr/bin/env bash
# nearflow from Python beside pyoxigraph and rdflib's own engine, in one process, interleaved
# (crates/python/bench/compare.py; its arguments follow): builds the wheel and its virtual
# environment as scripts/python-test.sh does (running the Python tests on the way), adds
# pyoxigraph from PyPI, and runs the comparison on ../shared/data's 1M SP²Bench file by default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/python-test.sh -q -k "not w3c" >/dev/null
target/python-venv/bin/pip install -q --disable-pip-version-check pyoxigraph==0.5.13
exec target/python-venv/bin/python crates/python/bench/compare.py "$@"
