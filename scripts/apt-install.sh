#!/usr/bin/env bash
# Installs Debian packages that are missing, robust to a package index that cannot be updated:
#   scripts/apt-install.sh WHO PKG...
# It tries the install first, from the index already on the machine; only when that fails does
# it run `apt-get update` (whose failure, e.g. one unreachable extra source, is only a warning)
# and try again. It fails only when a package still is not installed, naming it.
set -uo pipefail
who=$1
shift
missing() {
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || echo "$pkg"
  done
}
mapfile -t need < <(missing "$@")
[ ${#need[@]} -eq 0 ] && exit 0
echo "$who: installing ${need[*]}" >&2
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@" >/dev/null; }
if ! install "${need[@]}"; then
  $SUDO apt-get update -qq || echo "$who: warning: apt-get update failed; installing from the index there is" >&2
  install "${need[@]}" || true
fi
mapfile -t still < <(missing "${need[@]}")
if [ ${#still[@]} -gt 0 ]; then
  echo "$who: cannot install ${still[*]} (apt-get install failed; see above)" >&2
  exit 1
fi
