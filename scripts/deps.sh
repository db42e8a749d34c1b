#!/usr/bin/env bash
# Installs the system packages nearflow builds against, when missing (Debian/Ubuntu).
# hwlocality links Debian's libhwloc (2.9) through pkg-config; libhwloc needs libudev.
set -euo pipefail
"$(dirname "$0")/apt-install.sh" nearflow libhwloc-dev libudev-dev pkg-config
command -v cargo >/dev/null || { echo "nearflow: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
