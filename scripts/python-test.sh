#!/usr/bin/env bash
# The Python package as a user gets it: builds the wheel of crates/python with maturin (in the
# workspace's target folder, sharing its compiled dependencies), installs it into a fresh
# virtual environment with the test's packages from PyPI (crates/python/tests/requirements.txt),
# runs pytest on crates/python/tests against the installed wheel (arguments go to it), then
# rdflib's own store tests against the plugin (crates/python/tests/rdflib_suite.py).
set -euo pipefail
cd "$(dirname "$0")/.."
venv=target/python-venv
rm -rf "$venv"
if ! python3 -m venv "$venv" >/dev/null 2>&1; then
  # Debian's python3 makes virtual environments with its python3-venv package.
  scripts/apt-install.sh nearflow-python python3-venv
  rm -rf "$venv"
  python3 -m venv "$venv"
fi
"$venv/bin/pip" install -q --disable-pip-version-check -r crates/python/tests/requirements.txt
rm -rf target/wheels
# The wheel links the system's libhwloc (scripts/deps.sh installs it), so it is a linux_x86_64
# wheel for this machine, not a manylinux one with the library inside.
PATH="$PWD/$venv/bin:$PATH" maturin build --release --auditwheel skip \
  -m crates/python/Cargo.toml -o target/wheels
"$venv/bin/pip" install -q --disable-pip-version-check --no-deps target/wheels/nearflow-*.whl
(cd crates/python/tests && "../../../$venv/bin/python" -m pytest -q -p no:cacheprovider "$@")
# rdflib's own tests of store plugins, from its source distribution on PyPI (the version the
# tests pinned), run against nearflow's plugin.
version=$(sed -n 's/^rdflib==//p' crates/python/tests/requirements.txt)
src=target/rdflib-tests/rdflib-$version
if [ ! -d "$src/test" ]; then
  rm -rf target/rdflib-tests
  "$venv/bin/pip" download -q --disable-pip-version-check --no-deps --no-binary :all: \
    -d target/rdflib-tests "rdflib==$version"
  tar xzf "target/rdflib-tests/rdflib-$version.tar.gz" -C target/rdflib-tests
fi
"$venv/bin/python" crates/python/tests/rdflib_suite.py "$src"
