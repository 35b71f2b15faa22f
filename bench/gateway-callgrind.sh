#!/usr/bin/env bash
# Instructions per request of one proxy under valgrind's callgrind, on the
# HTTP/1.1 workloads of bench/gateway.sh (same backends, same keys):
# a count, not a time, so it repeats whatever else the machine is doing
# (BENCHMARKS.md, "Instructions per request").
#
#   bash bench/gateway-callgrind.sh loadring [BINARY]   # default: target/release/loadring
#   bash bench/gateway-callgrind.sh haproxy
#   bash bench/gateway-callgrind.sh nginx
#   CG_PROTOCOL=h2c bash bench/gateway-callgrind.sh loadring|haproxy
#   CG_WORKLOAD=hot CG_BOUNDED=1 bash bench/gateway-callgrind.sh loadring|haproxy
#
# CG_WORKLOAD=hot: bench/gateway.sh's hot keys instead of the uniform ones.
# CG_BOUNDED=1: the bounded rows of bench/gateway.sh (loadring's
# load_factor=1.25, HAProxy's hash-balance-factor 125; not nginx).
#
# CG_CACHE=1: valgrind's cache simulation too (an L1 of instructions and
# one of data, a last level, sized as this machine's): the misses of each
# per request beside the instructions, the same for each run of the same
# binary, where time is not.
#
# CG_FOOTPRINT=1: the code a request runs through as well
# (bench/code-footprint.py): the distinct instructions run on most
# requests and the 64-byte lines they lie in, per function and per crate.
# The instruction cache's misses follow those lines, not the count of
# instructions (BENCHMARKS.md, "The code a request runs through").
#
# CG_PROTOCOL=h2c: HTTP/2 with prior knowledge instead (h2load, 16
# connections x 16 streams, the key in the path as bench/gateway.sh's h2c
# rows; needs nghttp2-client), 40,000 requests counted after 4,000 not.
#
# Needs valgrind and wrk (and haproxy or nginx for theirs); build first with
# `cargo build --release -p loadring-cli -p loadring-gatebench`. Settings:
# CG_SECONDS (8: the measured wrk run, after a 3 s warm-up that is not
# counted), CG_CONNECTIONS (64), CG_PORT (21100: the port base; the proxy
# listens on base+100, the 8 backends on base+1..base+8). Everything
# listens on 127.0.0.1; the backends, the proxy and valgrind are stopped by
# pid at the end.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
which=${1:?usage: gateway-callgrind.sh loadring [BINARY] | haproxy | nginx}
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${2:-$TARGET/release/loadring}
GATEBENCH=$TARGET/release/loadring-gatebench
SECONDS_RUN=${CG_SECONDS:-8}
CONNECTIONS=${CG_CONNECTIONS:-64}
BASE=${CG_PORT:-21100}
PROTOCOL=${CG_PROTOCOL:-http1}
WORKLOAD=${CG_WORKLOAD:-uniform}
BOUNDED=${CG_BOUNDED:-}
CACHE=${CG_CACHE:-}
FOOTPRINT=${CG_FOOTPRINT:-}
case $WORKLOAD in uniform | hot) ;; *) echo "CG_WORKLOAD=$WORKLOAD: uniform or hot" >&2; exit 1 ;; esac
case $BOUNDED:$which in
    "":* | 1:loadring | 1:haproxy) ;;
    1:*) echo "CG_BOUNDED=1: loadring or haproxy (nginx has no bound)" >&2; exit 1 ;;
    *) echo "CG_BOUNDED=$BOUNDED: 1 or unset" >&2; exit 1 ;;
esac
case $CACHE in "" | 1) ;; *) echo "CG_CACHE=$CACHE: 1 or unset" >&2; exit 1 ;; esac
case $FOOTPRINT in "" | 1) ;; *) echo "CG_FOOTPRINT=$FOOTPRINT: 1 or unset" >&2; exit 1 ;; esac
PORT=$((BASE + 100))
ADMIN=$BASE
tools=(valgrind callgrind_annotate callgrind_control wrk curl)
if [ "$PROTOCOL" = h2c ]; then tools+=(h2load); fi
for tool in "${tools[@]}"; do
    command -v "$tool" >/dev/null || { echo "$tool is missing (apt-get install -y valgrind wrk curl)" >&2; exit 1; }
done
[ -x "$GATEBENCH" ] || { echo "$GATEBENCH is missing: cargo build --release -p loadring-gatebench" >&2; exit 1; }
OUT=$(mktemp -d /tmp/gateway-callgrind.XXXXXX)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

"$GATEBENCH" keys --workload "$WORKLOAD" --requests 200000 --keys 10000 --seed 42 --out "$OUT/$WORKLOAD.keys"
"$GATEBENCH" backends --base-port $((BASE + 1)) --count 8 --admin-port "$ADMIN" --mean-ms 5 --seed 1 \
    2>"$OUT/backends.log" &
PIDS+=($!)
for _ in $(seq 100); do curl -sf "http://127.0.0.1:$ADMIN/stats" >/dev/null && break; sleep 0.1; done

endpoints=() nginx_servers="" haproxy_servers=""
for i in $(seq 8); do
    addr=127.0.0.1:$((BASE + i))
    endpoints+=(-e "$addr")
    nginx_servers+="server $addr; "
    haproxy_servers+="    server s$i $addr id $i"$'\n'
done
case $which in
    loadring)
        key=header:X-Key
        if [ "$PROTOCOL" = h2c ]; then key=path; fi
        policy=nginx_hash:consistent=true
        if [ -n "$BOUNDED" ]; then policy="$policy load_factor=1.25"; fi
        command=("$BIN" proxy --listen "127.0.0.1:$PORT" --policy "$policy"
            --key "$key" "${endpoints[@]}") ;;
    haproxy)
        bind_options="" balance="hdr(X-Key)" bound=""
        if [ -n "$BOUNDED" ]; then bound=$'    hash-balance-factor 125\n'; fi
        if [ "$PROTOCOL" = h2c ]; then bind_options=" proto h2" balance=uri; fi
        printf 'global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n    http-reuse always\nfrontend front\n    bind 127.0.0.1:%s%s\n    default_backend pool\nbackend pool\n    balance %s\n    hash-type consistent\n%s%s' \
            "$PORT" "$bind_options" "$balance" "$bound" "$haproxy_servers" >"$OUT/haproxy.cfg"
        command=(haproxy -db -f "$OUT/haproxy.cfg") ;;
    nginx)
        # One process (no master), as root: callgrind_control must reach it.
        mkdir -p "$OUT/nginx"
        cat >"$OUT/nginx.conf" <<NGINX
daemon off; master_process off; user root; pid $OUT/nginx/nginx.pid; error_log $OUT/nginx/error.log warn;
events { worker_connections 4096; }
http {
    access_log off; keepalive_requests 1000000;
    client_body_temp_path $OUT/nginx/b; proxy_temp_path $OUT/nginx/p; fastcgi_temp_path $OUT/nginx/f;
    uwsgi_temp_path $OUT/nginx/u; scgi_temp_path $OUT/nginx/s;
    upstream pool { hash \$http_x_key consistent; $nginx_servers keepalive 256; keepalive_requests 1000000; }
    server { listen 127.0.0.1:$PORT; location / { proxy_pass http://pool; proxy_http_version 1.1; proxy_set_header Connection ""; } }
}
NGINX
        command=(nginx -p "$OUT/nginx" -e "$OUT/nginx/error.log" -c "$OUT/nginx.conf") ;;
    *) echo "unknown proxy $which: loadring, haproxy or nginx" >&2; exit 1 ;;
esac

valgrind --tool=callgrind ${CACHE:+--cache-sim=yes} ${FOOTPRINT:+--dump-instr=yes} --instr-atstart=no --callgrind-out-file="$OUT/callgrind.out.%p" \
    "${command[@]}" >"$OUT/proxy.log" 2>&1 &
VALGRIND=$!
PIDS+=("$VALGRIND")
probe=(curl -s -o /dev/null "http://127.0.0.1:$PORT/k/probe")
if [ "$PROTOCOL" = h2c ]; then probe=(curl -s --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$PORT/k/probe"); fi
for _ in $(seq 300); do "${probe[@]}" && break; sleep 0.2; done
if [ "$PROTOCOL" = h2c ]; then
    head -n 20000 "$OUT/$WORKLOAD.keys" | sed "s|^|http://127.0.0.1:$PORT/k/|" >"$OUT/$WORKLOAD.uris"
    h2load -c 16 -m 16 -t 1 -n 4000 -i "$OUT/$WORKLOAD.uris" >/dev/null 2>&1 || true
    callgrind_control -i on "$VALGRIND" >/dev/null || true
    h2load -c 16 -m 16 -t 1 -n 40000 -i "$OUT/$WORKLOAD.uris" >"$OUT/h2load.txt" 2>&1 || true
    requests=$(awk '/^requests:/ { print $8 }' "$OUT/h2load.txt")
else
    export GATEBENCH_KEYS=$OUT/$WORKLOAD.keys GATEBENCH_THREADS=1
    wrk -t1 -c"$CONNECTIONS" -d3s -s bench/gateway/keys.lua "http://127.0.0.1:$PORT/" >/dev/null
    callgrind_control -i on "$VALGRIND" >/dev/null || true
    wrk -t1 -c"$CONNECTIONS" -d"${SECONDS_RUN}s" --timeout 5s -s bench/gateway/keys.lua \
        "http://127.0.0.1:$PORT/" >"$OUT/wrk.txt"
    requests=$(awk '/requests in/ {print $1}' "$OUT/wrk.txt")
fi
callgrind_control -i off "$VALGRIND" >/dev/null || true
callgrind_control -d "$VALGRIND" >/dev/null || true
for _ in $(seq 100); do ls "$OUT"/callgrind.out.*.1 >/dev/null 2>&1 && break; sleep 0.1; done
sleep 1
total=0
for file in "$OUT"/callgrind.out.*.1; do
    count=$(callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ && !seen {gsub(",", "", $1); print $1; seen = 1}')
    total=$((total + ${count:-0}))
done
echo "$which ($PROTOCOL, $WORKLOAD${BOUNDED:+, bounded}): $requests requests, $total instructions, $((total / requests)) per request (profile: $OUT)"
if [ "$CACHE" = 1 ]; then
    # The totals line: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw, summed over the files.
    for file in "$OUT"/callgrind.out.*.1; do
        callgrind_annotate "$file" 2>/dev/null | awk '/PROGRAM TOTALS/ && !seen { seen = 1; n = 0
            for (i = 1; i <= NF; i++) if ($i ~ /^[0-9,]+$/) { v = $i; gsub(",", "", v); printf "%s ", v; n++ }
            print "" }'
    done | awk -v n="$requests" '{ for (i = 1; i <= NF; i++) sum[i] += $i; fields = NF }
        END { split("instructions reads writes I1-misses D1-read-misses D1-write-misses LL-instruction-misses LL-read-misses LL-write-misses", name, " ")
              printf "per request:"; for (i = 1; i <= fields; i++) printf " %s %.1f", name[i], sum[i] / n; print "" }'
fi
if [ "$FOOTPRINT" = 1 ]; then
    python3 bench/code-footprint.py --requests "$requests" "$OUT"/callgrind.out.*.1
fi
