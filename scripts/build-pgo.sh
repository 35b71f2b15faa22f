#!/usr/bin/env bash
# scripts/build-pgo.sh: a profile-guided release build of `loadring`
# (BENCHMARKS.md, "A profile-guided build").
#
#   bash scripts/build-pgo.sh            # about 15 minutes on 2 cores
#
# Opt-in: `cargo build --release` stays the plain build. This one builds
# `loadring` three times over, and is worth it for the gateway: a request
# through `loadring proxy` runs through more code than the first-level
# instruction cache holds, and a profile lets the compiler put the code that
# runs together next to each other and the code that never runs out of the way.
#
# Needs cargo and rustup's `llvm-tools-preview` component (for
# `llvm-profdata`; when it is missing the script prints the rustup line and
# exits 1). Nothing from outside this repository: the training load comes
# from `loadring-gatebench` (bench/gateway/).
#
# What it does:
#  1. builds `loadring` with `-Cprofile-generate` (for the host target, so
#     build scripts and proc macros stay uninstrumented);
#  2. trains it: 8 `loadring-gatebench backends` (mean service time 5 ms) and
#     the instrumented proxy in front of them, placing the `hot` keys of
#     bench/gateway.sh (zipf over 10,000 keys plus one viral key, seed 7,
#     not the benchmark's seed 42): HTTP/1.1 with `X-Key` under
#     `nginx_hash:consistent=true`, the same with `load_factor=1.25`, and
#     `haproxy_hash:type=consistent balance=125`; then HTTP/2 with prior
#     knowledge, the key in the path, under `maglev`; then the same two
#     protocols over TLS (HTTPS/1.1 with `X-Key` under
#     `nginx_hash:consistent=true`, HTTP/2 under `maglev`), with a
#     certificate `loadring-gatebench cert` makes for 127.0.0.1. Each phase
#     PGO_REQUESTS (40,000) requests over 128 connections; any answer but
#     200 stops the script. The benchmark's `uniform` keys are never used, so
#     that bench/gateway.sh measures the build on a load it was not trained on;
#  3. merges the profiles with `llvm-profdata` and builds `loadring` again
#     with `-Cprofile-use`.
#
# Output: TARGET/pgo/loadring (TARGET: CARGO_TARGET_DIR, or ./target). The
# instrumented and the final builds keep their own target folders
# (TARGET/pgo-generate, TARGET/pgo-use), so the plain build's stays as it is.
# Settings (environment): PGO_REQUESTS (40000), PGO_PORT (19500: port base;
# the backends take BASE+1..BASE+8, the proxy BASE+80).
#
# Everything listens on 127.0.0.1 only; every process it started is stopped
# by pid when it exits.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
REQUESTS=${PGO_REQUESTS:-40000}
BASE=${PGO_PORT:-19500}
case $REQUESTS in
    '' | *[!0-9]* | 0*) echo "PGO_REQUESTS=$REQUESTS: accepted a whole number from 1" >&2; exit 1 ;;
esac
case $BASE in
    '' | *[!0-9]* | 0*) echo "PGO_PORT=$BASE: accepted a port from 1 to 65455" >&2; exit 1 ;;
esac
if [ "${#BASE}" -gt 5 ] || [ "$BASE" -gt 65455 ]; then
    echo "PGO_PORT=$BASE: accepted a port from 1 to 65455" >&2
    exit 1
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo is needed (https://rustup.rs)" >&2; exit 1; }
HOST=$(rustc -vV | sed -n 's/^host: //p')
PROFDATA=$(rustc --print sysroot)/lib/rustlib/$HOST/bin/llvm-profdata
if ! [ -x "$PROFDATA" ]; then
    echo "missing llvm-profdata; install it with:" >&2
    echo "    rustup component add llvm-tools-preview" >&2
    exit 1
fi

TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
PROFILES=$TARGET/pgo/profiles
WORK=$(mktemp -d /tmp/loadring-pgo.XXXXXX)
BACKENDS_PID= PROXY_PID=
stop() { # PID: stop by pid and wait, so that an instrumented proxy writes its profile
    [ -n "$1" ] || return 0
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
trap 'stop "$PROXY_PID"; stop "$BACKENDS_PID"; rm -rf "$WORK"' EXIT

echo "== 1/3: the instrumented build (RUSTFLAGS=-Cprofile-generate, $TARGET/pgo-generate)"
cargo build --release -q -p loadring-gatebench
GATEBENCH=$TARGET/release/loadring-gatebench
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-generate=$PROFILES" CARGO_TARGET_DIR=$TARGET/pgo-generate \
    cargo build --release -q -p loadring-cli --target "$HOST"
INSTRUMENTED=$TARGET/pgo-generate/$HOST/release/loadring

echo "== 2/3: training ($REQUESTS requests a phase, the hot keys, seed 7)"
rm -rf "$PROFILES"
mkdir -p "$PROFILES"
for port in $(seq $((BASE)) $((BASE + 8))) $((BASE + 80)); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
        echo "127.0.0.1:$port is busy: set PGO_PORT to another base" >&2
        exit 1
    fi
done
"$GATEBENCH" keys --workload hot --requests 100000 --keys 10000 --seed 7 --out "$WORK/hot.keys"
"$GATEBENCH" backends --base-port $((BASE + 1)) --count 8 --admin-port "$BASE" --mean-ms 5 --seed 7 \
    2>"$WORK/backends.log" &
BACKENDS_PID=$!
endpoints=()
for i in $(seq 8); do endpoints+=(-e "127.0.0.1:$((BASE + i))"); done
PROXY=127.0.0.1:$((BASE + 80))

"$GATEBENCH" cert --out "$WORK/tls" >/dev/null
phase() { # POLICY KEY PROTOCOL KEY-IN [tls]
    local serve=() send=()
    if [ "${5:-}" = tls ]; then
        serve=(--tls-cert "$WORK/tls/gateway.crt" --tls-key "$WORK/tls/gateway.key")
        send=(--tls-ca "$WORK/tls/ca.pem")
    fi
    echo "   $1, --key $2, $3${5:+ over TLS}"
    LOADRING_LOG=warn "$INSTRUMENTED" proxy --listen "$PROXY" --policy "$1" --key "$2" "${endpoints[@]}" \
        "${serve[@]}" 2>"$WORK/proxy.log" &
    PROXY_PID=$!
    local ready=false
    for _ in $(seq 100); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$((BASE + 80))") 2>/dev/null; then ready=true; break; fi
        kill -0 "$PROXY_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ "$ready" != true ]; then
        echo "the instrumented proxy did not start listening on $PROXY:" >&2
        cat "$WORK/proxy.log" >&2
        exit 1
    fi
    "$GATEBENCH" drive --to "$PROXY" --keys "$WORK/hot.keys" --requests "$REQUESTS" \
        --connections 128 --streams 8 --protocol "$3" --key-in "$4" "${send[@]}" | sed 's/^/     /'
    stop "$PROXY_PID"
    PROXY_PID=
}
phase 'nginx_hash:consistent=true' header:X-Key http1 header
phase 'nginx_hash:consistent=true load_factor=1.25' header:X-Key http1 header
phase 'haproxy_hash:type=consistent balance=125' header:X-Key http1 header
phase maglev path h2c path
phase 'nginx_hash:consistent=true' header:X-Key http1 header tls
phase maglev path h2 path tls
stop "$BACKENDS_PID"
BACKENDS_PID=
if ! compgen -G "$PROFILES/*.profraw" >/dev/null; then
    echo "the instrumented proxy wrote no profile into $PROFILES" >&2
    exit 1
fi

echo "== 3/3: the profile-guided build (RUSTFLAGS=-Cprofile-use, $TARGET/pgo-use)"
"$PROFDATA" merge -o "$TARGET/pgo/loadring.profdata" "$PROFILES"/*.profraw
RUSTFLAGS="${RUSTFLAGS:-} -Cprofile-use=$TARGET/pgo/loadring.profdata" CARGO_TARGET_DIR=$TARGET/pgo-use \
    cargo build --release -q -p loadring-cli --target "$HOST"
cp "$TARGET/pgo-use/$HOST/release/loadring" "$TARGET/pgo/loadring"
echo "== $TARGET/pgo/loadring"
