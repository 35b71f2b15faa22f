#!/usr/bin/env bash
# The test suite, from a fresh machine: installs the Debian daemons the live
# cross-checks run (nginx, HAProxy, nutcracker, memcached) when any is
# missing, then runs every test of the workspace. Extra arguments go to
# `cargo test` (e.g. `bash scripts/test.sh -p loadring`).
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for package in nginx haproxy nutcracker memcached; do
  if ! command -v "$package" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$package" ] && [ ! -x "/usr/bin/$package" ]; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]} (Debian packages the live cross-checks run)"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y "${missing[@]}"
fi

cargo test --workspace "$@"
