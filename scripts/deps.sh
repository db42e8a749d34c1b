#!/usr/bin/env bash
# Installs the system packages nearflow builds against, when missing (Debian/Ubuntu).
# hwlocality links Debian's libhwloc (2.9) through pkg-config; libhwloc needs libudev.
set -euo pipefail
need=()
for pkg in libhwloc-dev libudev-dev pkg-config; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  echo "nearflow: installing ${need[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}"
fi
command -v cargo >/dev/null || { echo "nearflow: cargo not found; install Rust (https://rustup.rs)" >&2; exit 1; }
