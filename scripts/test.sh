#!/usr/bin/env bash
# The test suite, from a fresh machine: installs the Debian daemons the live
# tests run when any is missing (scripts/install-daemons.sh: nginx, HAProxy,
# nutcracker, memcached, etcd, etcdctl, dnsmasq, headless Chromium), then
# runs every test of the workspace. Extra arguments go to `cargo test`
# (e.g. `bash scripts/test.sh -p loadring`).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-daemons.sh
cargo test --workspace "$@"
