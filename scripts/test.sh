#!/usr/bin/env bash
# The test suite, from a fresh machine: installs the Debian daemons the live
# tests run (nginx, HAProxy, nutcracker, memcached for the cross-checks;
# etcd, etcdctl and dnsmasq for membership discovery; headless Chromium for the
# admin dashboard's browser tests) when any is missing,
# then runs every test of the workspace. Extra arguments go to
# `cargo test` (e.g. `bash scripts/test.sh -p loadring`).
set -euo pipefail
cd "$(dirname "$0")/.."

# binary:package
missing=()
for pair in nginx:nginx haproxy:haproxy nutcracker:nutcracker memcached:memcached \
    etcd:etcd-server etcdctl:etcd-client dnsmasq:dnsmasq chromium:chromium; do
  binary="${pair%%:*}"
  package="${pair#*:}"
  if ! command -v "$binary" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$binary" ] && [ ! -x "/usr/bin/$binary" ]; then
    missing+=("$package")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]} (Debian packages the live tests run)"
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y "${missing[@]}"
fi

cargo test --workspace "$@"
