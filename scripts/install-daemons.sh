#!/usr/bin/env bash
# Installs the Debian daemons the live tests run, when any is missing:
# nginx, HAProxy, nutcracker and memcached for the cross-checks; etcd,
# etcdctl and dnsmasq for membership discovery; headless Chromium for the
# admin dashboard's browser tests. Nothing to do when all are there.
# scripts/test.sh runs it first; .ci/run starts it early, beside the lints.
set -euo pipefail

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
