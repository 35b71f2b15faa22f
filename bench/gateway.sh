#!/usr/bin/env bash
# bench/gateway.sh: `loadring proxy` side by side with nginx and HAProxy, on
# loopback, same backends, same requests, in one run (BENCHMARKS.md, "Gateway").
#
#   bash bench/gateway.sh            # about 10 minutes; prints the table
#
# Needs nginx, haproxy, wrk and curl (Debian: `apt-get install -y nginx
# haproxy wrk curl`) and cargo. It installs nothing: when something is
# missing it prints the apt-get line and exits 1. It builds the release
# binaries `loadring` and `loadring-gatebench` (bench/gateway/) with cargo.
#
# What it does:
#  1. `loadring-gatebench keys`: two seeded key files of 200,000 requests:
#     `uniform` over 10,000 keys; `hot`: zipf (s=0.99) over 10,000 keys plus
#     one viral key on 10% of requests.
#  2. `loadring-gatebench backends`: N backends (127.0.0.1:BASE+1..BASE+N),
#     exponential service time (mean 5 ms), counting peak concurrency and the
#     requests of each key; admin on 127.0.0.1:BASE.
#  3. Per workload, each proxy in turn on 127.0.0.1:BASE+80, placing keys
#     the same way when there is no load:
#       nginx     upstream hash $http_x_key consistent, keepalive
#       haproxy   balance hdr(X-Key), hash-type consistent (sdbm + avalanche
#                 by default), http-reuse always; with and without
#                 hash-balance-factor 125; servers `id 1..N`
#       loadring  --key header:X-Key with nginx_hash:consistent=true (alone
#                 and with load_factor=1.25) and
#                 haproxy_hash:type=consistent balance=125 (hash_key=1..N)
#     a 1 s wrk warm-up, 1 s to drain, the backends' counts reset and their
#     service times restarted with the round's seed (every proxy of a round
#     waits the same service times: common random numbers), then wrk
#     (-t THREADS -c CONNECTIONS -d DURATION, bench/gateway/keys.lua), the
#     proxy's CPU ticks (its process and children) read before and after.
#     ROUNDS (3) samples of each, in rounds: each round runs the six in
#     turn, starting two further down the list than the round before, so
#     that each proxy is measured early, midway and late in the workload's
#     rounds (a single 10 s sample of one proxy moves by 10-25% from one try
#     to the next on a shared 2-core machine; see BENCHMARKS.md).
#  4. `loadring-gatebench report`: the table (stdout and OUT/report.md),
#     each figure the median of its samples, with the lowest and highest CPU
#     per request and p99, then loadring's rows against each peer's round by
#     round (the same seed, so the same service times), and the plot
#     (docs/gateway-bench.png).
#  5. The `churn` workload (loadring only): a second backends process on
#     1,024 ports (127.0.0.1:BASE+1001..BASE+2024, admin BASE+90), the proxy
#     reading them from an endpoints file (`--endpoints`), with
#     `maglev:table_size=131071` then `c_murmurhash_bl`; each policy runs
#     steady, then while `loadring-gatebench churn` rewrites the file every
#     200 ms (one endpoint removed, then added back, in turn). Per run: wrk's
#     figures, the proxy's peak RSS (VmHWM) and, under churn, each change's
#     time to the proxy's log line saying the new membership is in place
#     (LOADRING_LOG=info). `loadring-gatebench churn-report`: OUT/churn.md.
#  6. Protocols (issue 26), the uniform keys over the same backends (HTTP/1.1
#     behind every proxy), each proxy in turn on 127.0.0.1:BASE+80:
#       tls-*   HTTPS/1.1 in front, one certificate made by openssl (EC
#               P-256): nginx `listen ... ssl`, HAProxy `bind ... ssl crt`,
#               loadring --tls-cert/--tls-key; wrk over https (keys.lua).
#       h2c-*   HTTP/2 with prior knowledge in front: nginx `listen ... http2`,
#               HAProxy `bind ... proto h2`, loadring's own listener;
#               h2load (-c CONNECTIONS/4 clients, -m 16 streams each, the key
#               in the path: nginx `hash $request_uri consistent`, HAProxy
#               `balance uri`, loadring --key path), p99 from its log file.
#     Each: req/s, p99 and the proxy's CPU per request (its process and
#     children). ROUNDS samples of each, in rounds as the uniform rows' (each
#     round's service times its seed's, the three proxies of a protocol in
#     turn, starting one further down each round); OUT/protocols.md gives
#     each proxy's medians with its lowest and highest CPU per request, and
#     every sample (a single 10 s sample of h2c moved its ratio to the
#     better peer between 1.1x and 1.6x from one hour to the next).
#
# Settings (environment): GATEBENCH_DURATION (s, 10), GATEBENCH_ROUNDS (3: the
# samples of each uniform and hot row, the report showing their medians), GATEBENCH_CONNECTIONS
# (256), GATEBENCH_THREADS (2), GATEBENCH_BACKENDS (8), GATEBENCH_MEAN_MS (5),
# GATEBENCH_PORT (19100: the port base), GATEBENCH_OUT (a new /tmp folder),
# GATEBENCH_PLOT (docs/gateway-bench.png for a whole run; OUT/gateway-bench.png
# with GATEBENCH_ONLY or GATEBENCH_LOADRING, which leave the committed figure
# alone), GATEBENCH_ONLY (a regex on run
# names, e.g. 'uniform-loadring' or 'churn'), GATEBENCH_CHURN_ENDPOINTS (1024), GATEBENCH_LOADRING (another loadring
# binary to measure, e.g. the profile-guided build of scripts/build-pgo.sh), GATEBENCH_PERF=1 (record `perf record -g`
# of the proxy during each run into OUT/NAME.perf.data; needs linux-perf).
#
# Everything listens on 127.0.0.1 only; every process it started is stopped
# by pid when it exits (trap EXIT).
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$PWD
DURATION=${GATEBENCH_DURATION:-10}
ROUNDS=${GATEBENCH_ROUNDS:-3}
CONNECTIONS=${GATEBENCH_CONNECTIONS:-256}
THREADS=${GATEBENCH_THREADS:-2}
BACKENDS=${GATEBENCH_BACKENDS:-8}
MEAN_MS=${GATEBENCH_MEAN_MS:-5}
BASE=${GATEBENCH_PORT:-19100}
ONLY=${GATEBENCH_ONLY:-.}
PERF=${GATEBENCH_PERF:-0}
DASHBOARD=${GATEBENCH_DASHBOARD:-off}
PROXY_PORT=$((BASE + 80))
DASHBOARD_PORT=$((BASE + 81))
ADMIN_PORT=$BASE

# --- what must be there (nothing is installed here) ---
# Debian installs nginx and haproxy in /usr/sbin, not on a user's PATH.
PATH=$PATH:/usr/sbin:/sbin
missing=()
for tool in nginx:nginx haproxy:haproxy wrk:wrk curl:curl h2load:nghttp2-client openssl:openssl; do
    command -v "${tool%%:*}" >/dev/null 2>&1 || missing+=("${tool#*:}")
done
if [ "$PERF" = 1 ] && ! command -v perf >/dev/null 2>&1; then missing+=(linux-perf); fi
case $ROUNDS in
    '' | *[!0-9]* | 0*) echo "GATEBENCH_ROUNDS=$ROUNDS: accepted a whole number from 1" >&2; exit 1 ;;
esac
case $DASHBOARD in
    off | idle) ;;
    open) command -v chromium >/dev/null 2>&1 || missing+=(chromium) ;;
    *) echo "GATEBENCH_DASHBOARD=$DASHBOARD: accepted off, idle, open" >&2; exit 1 ;;
esac
if [ ${#missing[@]} -gt 0 ]; then
    echo "missing: ${missing[*]}; install with:" >&2
    echo "    apt-get install -y ${missing[*]}" >&2
    exit 1
fi
command -v cargo >/dev/null 2>&1 || { echo "cargo is needed (https://rustup.rs)" >&2; exit 1; }
NGINX=$(command -v nginx)
HAPROXY=$(command -v haproxy)

echo "== building release binaries (cargo build --release -p loadring-cli -p loadring-gatebench)"
cargo build --release -q -p loadring-cli -p loadring-gatebench
TARGET=${CARGO_TARGET_DIR:-$ROOT/target}
LOADRING=${GATEBENCH_LOADRING:-$TARGET/release/loadring}
GATEBENCH=$TARGET/release/loadring-gatebench

OUT=${GATEBENCH_OUT:-$(mktemp -d /tmp/gatebench.XXXXXX)}
if [ -n "${GATEBENCH_ONLY:-}${GATEBENCH_LOADRING:-}" ]; then
    PLOT=${GATEBENCH_PLOT:-$OUT/gateway-bench.png}
else
    PLOT=${GATEBENCH_PLOT:-$ROOT/docs/gateway-bench.png}
fi
mkdir -p "$OUT"
echo "== output in $OUT"
{
    echo "date: $(date -u +%FT%TZ)"
    echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
    echo "kernel: $(uname -r)"
    echo "nginx: $("$NGINX" -v 2>&1 | sed 's/.*: //')"
    echo "haproxy: $("$HAPROXY" -v | head -1)"
    echo "wrk: $(wrk -v 2>&1 | head -1 || true)"
    echo "loadring: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown), $LOADRING"
    echo "settings: ${DURATION}s per run, $ROUNDS rounds of the uniform and hot rows, wrk -t$THREADS -c$CONNECTIONS, $BACKENDS backends, exp service time mean ${MEAN_MS} ms, dashboard $DASHBOARD"
    echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
} | tee "$OUT/machine.txt"

# --- processes, stopped by pid on exit ---
BACKENDS_PID=
CHURN_BACKENDS_PID=
CHURN_PID=
PROXY_PID=
PERF_PID=
BROWSER_PID=
cleanup() {
    for pid in $BROWSER_PID $PERF_PID $CHURN_PID $PROXY_PID $CHURN_BACKENDS_PID $BACKENDS_PID; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
}
trap cleanup EXIT

for port in $ADMIN_PORT $PROXY_PORT $DASHBOARD_PORT $(seq $((BASE + 1)) $((BASE + BACKENDS))); do
    if (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
        echo "127.0.0.1:$port is busy: set GATEBENCH_PORT to another base" >&2
        exit 1
    fi
done

wait_http() { # URL: until it answers, 10 s at most
    for _ in $(seq 100); do
        curl -s -o /dev/null -H 'X-Key: probe' "$1" && return 0
        sleep 0.1
    done
    echo "no answer from $1" >&2
    return 1
}

# --- keys, backends, endpoints ---
for workload in uniform hot; do
    "$GATEBENCH" keys --workload "$workload" --requests 200000 --keys 10000 --seed 42 --out "$OUT/$workload.keys"
done
"$GATEBENCH" backends --base-port $((BASE + 1)) --count "$BACKENDS" --admin-port "$ADMIN_PORT" \
    --mean-ms "$MEAN_MS" --seed 1 2>"$OUT/backends.log" &
BACKENDS_PID=$!
wait_http "http://127.0.0.1:$ADMIN_PORT/stats"

: >"$OUT/nginx.endpoints"
: >"$OUT/haproxy.endpoints"
NGINX_SERVERS=
HAPROXY_SERVERS=
for i in $(seq "$BACKENDS"); do
    addr=127.0.0.1:$((BASE + i))
    echo "$addr" >>"$OUT/nginx.endpoints"
    echo "$addr hash_key=$i" >>"$OUT/haproxy.endpoints"
    NGINX_SERVERS+="        server $addr;"$'\n'
    HAPROXY_SERVERS+="    server s$i $addr id $i"$'\n'
done

mkdir -p "$OUT/nginx"
. bench/gateway/nginx-conf.sh
nginx_conf "$OUT/nginx" "$PROXY_PORT" "$NGINX_SERVERS" >"$OUT/nginx.conf"

haproxy_cfg() { # FILE [hash-balance-factor]
    {
        echo "global"
        echo "    maxconn 4096"
        echo "defaults"
        echo "    mode http"
        echo "    timeout connect 5s"
        echo "    timeout client 30s"
        echo "    timeout server 30s"
        echo "    http-reuse always"
        echo "frontend front"
        echo "    bind 127.0.0.1:$PROXY_PORT"
        echo "    default_backend pool"
        echo "backend pool"
        echo "    balance hdr(X-Key)"
        echo "    hash-type consistent"
        if [ -n "${2:-}" ]; then echo "    hash-balance-factor $2"; fi
        printf '%s' "$HAPROXY_SERVERS"
    } >"$1"
}
haproxy_cfg "$OUT/haproxy.cfg"
haproxy_cfg "$OUT/haproxy-bf125.cfg" 125

loadring_args() { # SPEC ENDPOINTS-FILE
    local args=(proxy --listen "127.0.0.1:$PROXY_PORT" --policy "$1" --key header:X-Key)
    if [ "$DASHBOARD" != off ]; then args+=(--admin "127.0.0.1:$DASHBOARD_PORT"); fi
    while read -r line; do args+=(-e "$line"); done <"$2"
    printf '%s\n' "${args[@]}"
}

# --- one run: NAME LABEL WORKLOAD OWNER-SPEC ENDPOINTS -- COMMAND... ---
: >"$OUT/runs.tsv"
# The proxy's process and its children (nginx's workers: the master only
# waits), comma-separated, for `perf record -p`.
proxy_pids() {
    echo "$PROXY_PID" $(cat /proc/"$PROXY_PID"/task/*/children 2>/dev/null) | tr ' ' ,
}
run() {
    local name=$1 label=$2 workload=$3 owner_spec=$4 endpoints=$5
    shift 6
    if ! [[ $name =~ $ONLY ]]; then return 0; fi
    # A round's sample has files of its own (NAME.rN.*); the report takes
    # the median of a proxy's samples.
    if [ -n "${ROUND:-}" ] && [ "$ROUNDS" -gt 1 ]; then name=$name.r$ROUND; fi
    echo "== $name: $*"
    "$@" >"$OUT/$name.proxy.log" 2>&1 &
    PROXY_PID=$!
    wait_http "http://127.0.0.1:$PROXY_PORT/"
    export GATEBENCH_KEYS=$OUT/$workload.keys GATEBENCH_THREADS=$THREADS
    wrk -t"$THREADS" -c"$CONNECTIONS" -d1s -s bench/gateway/keys.lua "http://127.0.0.1:$PROXY_PORT/" >/dev/null
    # The warm-up's last requests drain (their clients are gone) before the
    # counts restart: the peak must not start from them.
    sleep 1
    # Every proxy of a round is served the same service times (the backends'
    # streams restarted with the round's seed); each round, other ones.
    curl -sf "http://127.0.0.1:$ADMIN_PORT/reset?seed=${ROUND:-1}" >/dev/null
    if [ "$PERF" = 1 ]; then
        perf record -F 499 -g -p "$(proxy_pids)" -o "$OUT/$name.perf.data" 2>"$OUT/$name.perf.log" &
        PERF_PID=$!
    fi
    if [ "$DASHBOARD" = open ] && [[ $name == *loadring* ]]; then
        # A browser on the page: it polls /status every second.
        chromium --headless --no-sandbox --disable-gpu --no-first-run --remote-debugging-port=0 \
            --user-data-dir="$OUT/$name.chromium" "http://127.0.0.1:$DASHBOARD_PORT/" \
            >"$OUT/$name.chromium.log" 2>&1 &
        BROWSER_PID=$!
        sleep 2
    fi
    local before after
    before=$("$GATEBENCH" cpu "$PROXY_PID")
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 2s -s bench/gateway/keys.lua \
        "http://127.0.0.1:$PROXY_PORT/" >"$OUT/$name.wrk"
    after=$("$GATEBENCH" cpu "$PROXY_PID")
    if [ -n "$PERF_PID" ]; then
        kill -INT "$PERF_PID" 2>/dev/null || true
        wait "$PERF_PID" 2>/dev/null || true
        PERF_PID=
    fi
    curl -sf "http://127.0.0.1:$ADMIN_PORT/stats" >"$OUT/$name.json"
    echo "$before $after" >"$OUT/$name.cpu"
    if [ -n "$BROWSER_PID" ]; then
        kill "$BROWSER_PID" 2>/dev/null || true
        wait "$BROWSER_PID" 2>/dev/null || true
        BROWSER_PID=
    fi
    kill "$PROXY_PID"
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=
    printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$label" "$workload" "$owner_spec" "$endpoints" >>"$OUT/runs.tsv"
    grep -E 'Requests/sec|Non-2xx|Socket errors' "$OUT/$name.wrk" | sed 's/^/    /'
}

NGINX_SPEC='nginx_hash:consistent=true'
HAPROXY_SPEC='haproxy_hash:type=consistent'
ROWS=6
run_row() { # WORKLOAD INDEX: the INDEX-th proxy of the table on WORKLOAD
    local workload=$1
    case $2 in
    0) run "$workload-nginx" "nginx hash consistent" "$workload" "$NGINX_SPEC" nginx.endpoints -- \
        "$NGINX" -p "$OUT/nginx" -e "$OUT/nginx/error.log" -c "$OUT/nginx.conf" ;;
    1) run "$workload-haproxy" "haproxy consistent" "$workload" "$HAPROXY_SPEC" haproxy.endpoints -- \
        "$HAPROXY" -db -f "$OUT/haproxy.cfg" ;;
    2) run "$workload-haproxy-bf125" "haproxy consistent bf=125" "$workload" "$HAPROXY_SPEC" haproxy.endpoints -- \
        "$HAPROXY" -db -f "$OUT/haproxy-bf125.cfg" ;;
    3) mapfile -t args < <(loadring_args "$NGINX_SPEC" "$OUT/nginx.endpoints")
        run "$workload-loadring-nginx" "loadring nginx_hash" "$workload" "$NGINX_SPEC" nginx.endpoints -- \
            "$LOADRING" "${args[@]}" ;;
    4) mapfile -t args < <(loadring_args "$NGINX_SPEC load_factor=1.25" "$OUT/nginx.endpoints")
        run "$workload-loadring-nginx-lf125" "loadring nginx_hash lf=1.25" "$workload" "$NGINX_SPEC" nginx.endpoints -- \
            "$LOADRING" "${args[@]}" ;;
    5) mapfile -t args < <(loadring_args "$HAPROXY_SPEC balance=125" "$OUT/haproxy.endpoints")
        run "$workload-loadring-haproxy-b125" "loadring haproxy_hash b=125" "$workload" "$HAPROXY_SPEC" haproxy.endpoints -- \
            "$LOADRING" "${args[@]}" ;;
    esac
}
# Each round starts two rows further down the table (rotating): over three
# rounds every proxy runs early, in the middle and late, so neither the
# machine's drift nor the order favours one.
for workload in uniform hot; do
    for round in $(seq "$ROUNDS"); do
        ROUND=$round
        for i in $(seq 0 $((ROWS - 1))); do
            run_row "$workload" $(((i + 2 * (round - 1)) % ROWS))
        done
    done
done
ROUND=

# --- churn: 1,024 endpoints, the endpoints file rewritten every 200 ms ---
CHURN_COUNT=${GATEBENCH_CHURN_ENDPOINTS:-1024}
CHURN_BASE=$((BASE + 1001))
CHURN_ADMIN=$((BASE + 90))
CHURN_RUNS=(churn-maglev-steady churn-maglev-churn churn-murmur-bl-steady churn-murmur-bl-churn)
churn_wanted=false
for name in "${CHURN_RUNS[@]}"; do
    if [[ $name =~ $ONLY ]]; then churn_wanted=true; fi
done
: >"$OUT/churn.tsv"

run_churn() { # NAME SPEC steady|churn
    local name=$1 spec=$2 mode=$3
    if ! [[ $name =~ $ONLY ]]; then return 0; fi
    cp "$OUT/churn.endpoints" "$OUT/$name.endpoints"
    echo "== $name: loadring proxy --policy $spec --endpoints ($CHURN_COUNT endpoints), $mode"
    LOADRING_LOG=info "$LOADRING" proxy --listen "127.0.0.1:$PROXY_PORT" --policy "$spec" \
        --key header:X-Key --endpoints "$OUT/$name.endpoints" >"$OUT/$name.proxy.log" 2>&1 &
    PROXY_PID=$!
    wait_http "http://127.0.0.1:$PROXY_PORT/"
    export GATEBENCH_KEYS=$OUT/uniform.keys GATEBENCH_THREADS=$THREADS
    wrk -t"$THREADS" -c"$CONNECTIONS" -d1s -s bench/gateway/keys.lua "http://127.0.0.1:$PROXY_PORT/" >/dev/null
    sleep 1
    # The steady and the churn run of a policy are served the same service times.
    curl -sf "http://127.0.0.1:$CHURN_ADMIN/reset?seed=1" >/dev/null
    if [ "$mode" = churn ]; then
        "$GATEBENCH" churn --file "$OUT/$name.endpoints" --log "$OUT/$name.changes" \
            --interval-ms 200 --seconds "$DURATION" &
        CHURN_PID=$!
    fi
    wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 2s -s bench/gateway/keys.lua \
        "http://127.0.0.1:$PROXY_PORT/" >"$OUT/$name.wrk"
    if [ -n "$CHURN_PID" ]; then
        wait "$CHURN_PID"
        CHURN_PID=
    fi
    awk '/^VmHWM:/ { print $2 }' "/proc/$PROXY_PID/status" >"$OUT/$name.rss"
    kill "$PROXY_PID"
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=
    printf '%s\t%s\t%s\n' "$name" "$spec" "$mode" >>"$OUT/churn.tsv"
    grep -E 'Requests/sec|Non-2xx|Socket errors' "$OUT/$name.wrk" | sed 's/^/    /'
}

if [ "$churn_wanted" = true ]; then
    for port in $CHURN_ADMIN $(seq "$CHURN_BASE" $((CHURN_BASE + CHURN_COUNT - 1))); do
        if (: </dev/tcp/127.0.0.1/"$port") 2>/dev/null; then
            echo "127.0.0.1:$port is busy: set GATEBENCH_PORT to another base" >&2
            exit 1
        fi
    done
    "$GATEBENCH" backends --base-port "$CHURN_BASE" --count "$CHURN_COUNT" --admin-port "$CHURN_ADMIN" \
        --mean-ms "$MEAN_MS" --seed 2 2>"$OUT/churn-backends.log" &
    CHURN_BACKENDS_PID=$!
    wait_http "http://127.0.0.1:$CHURN_ADMIN/stats"
    : >"$OUT/churn.endpoints"
    for i in $(seq 0 $((CHURN_COUNT - 1))); do echo "127.0.0.1:$((CHURN_BASE + i))" >>"$OUT/churn.endpoints"; done
    run_churn churn-maglev-steady 'maglev:table_size=131071' steady
    run_churn churn-maglev-churn 'maglev:table_size=131071' churn
    run_churn churn-murmur-bl-steady c_murmurhash_bl steady
    run_churn churn-murmur-bl-churn c_murmurhash_bl churn
    kill "$CHURN_BACKENDS_PID" 2>/dev/null || true
    wait "$CHURN_BACKENDS_PID" 2>/dev/null || true
    CHURN_BACKENDS_PID=
fi

# --- protocols: TLS HTTP/1.1 and h2c in front of each proxy ---
PROTO_RUNS=(tls-nginx tls-haproxy tls-loadring h2c-nginx h2c-haproxy h2c-loadring)
proto_wanted=false
for name in "${PROTO_RUNS[@]}"; do
    if [[ $name =~ $ONLY ]]; then proto_wanted=true; fi
done
: >"$OUT/protocols.tsv"
CLK_TCK=$(getconf CLK_TCK)

perf_start() { # NAME: with GATEBENCH_PERF=1, `perf record` of the proxy from now
    if [ "$PERF" = 1 ]; then
        perf record -F 499 -g -p "$(proxy_pids)" -o "$OUT/$1.perf.data" 2>"$OUT/$1.perf.log" &
        PERF_PID=$!
    fi
}
perf_stop() {
    if [ -n "$PERF_PID" ]; then
        kill -INT "$PERF_PID" 2>/dev/null || true
        wait "$PERF_PID" 2>/dev/null || true
        PERF_PID=
    fi
}

run_proto() { # NAME LABEL tls|h2c -- COMMAND...
    local name=$1 label=$2 mode=$3
    shift 4
    if ! [[ $name =~ $ONLY ]]; then return 0; fi
    local proxy=$name
    if [ -n "${ROUND:-}" ] && [ "$ROUNDS" -gt 1 ]; then name=$name.r$ROUND; fi
    echo "== $name: $*"
    "$@" >"$OUT/$name.proxy.log" 2>&1 &
    PROXY_PID=$!
    local before after requests p99 rps
    if [ "$mode" = tls ]; then
        for _ in $(seq 100); do
            curl -sk -o /dev/null "https://127.0.0.1:$PROXY_PORT/" && break
            sleep 0.1
        done
        export GATEBENCH_KEYS=$OUT/uniform.keys GATEBENCH_THREADS=$THREADS
        wrk -t"$THREADS" -c"$CONNECTIONS" -d1s -s bench/gateway/keys.lua "https://127.0.0.1:$PROXY_PORT/" >/dev/null
        sleep 1
        # Every proxy of the round is served the same service times.
        curl -sf "http://127.0.0.1:$ADMIN_PORT/reset?seed=${ROUND:-1}" >/dev/null
        perf_start "$name"
        before=$("$GATEBENCH" cpu "$PROXY_PID")
        wrk -t"$THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --timeout 2s -s bench/gateway/keys.lua \
            "https://127.0.0.1:$PROXY_PORT/" >"$OUT/$name.wrk"
        after=$("$GATEBENCH" cpu "$PROXY_PID")
        local line
        line=$(grep '^GATEBENCH ' "$OUT/$name.wrk" | sed 's/^GATEBENCH //')
        requests=$(echo "$line" | sed -E 's/.*"requests":([0-9]+).*/\1/')
        p99=$(echo "$line" | sed -E 's/.*"p99_us":([0-9.]+).*/\1/')
        rps=$(awk '/^Requests\/sec/ { print $2 }' "$OUT/$name.wrk")
    else
        for _ in $(seq 100); do
            curl -s --http2-prior-knowledge -o /dev/null "http://127.0.0.1:$PROXY_PORT/k/probe" && break
            sleep 0.1
        done
        local clients=$((CONNECTIONS / 4))
        h2load -c "$clients" -m 16 -t "$THREADS" -D 1 -i "$OUT/uniform.uris" >/dev/null 2>&1 || true
        sleep 1
        # Every proxy of the round is served the same service times.
        curl -sf "http://127.0.0.1:$ADMIN_PORT/reset?seed=${ROUND:-1}" >/dev/null
        perf_start "$name"
        before=$("$GATEBENCH" cpu "$PROXY_PID")
        h2load -c "$clients" -m 16 -t "$THREADS" -D "$DURATION" -i "$OUT/uniform.uris" \
            --log-file "$OUT/$name.h2log" >"$OUT/$name.h2load" 2>&1
        after=$("$GATEBENCH" cpu "$PROXY_PID")
        requests=$(awk '/^requests:/ { print $8 }' "$OUT/$name.h2load")
        rps=$(awk '/^finished in/ { sub(",", "", $4); print $4 }' "$OUT/$name.h2load")
        # Log lines: start time (us), status, time for the request (us).
        p99=$(awk '{ print $3 }' "$OUT/$name.h2log" | sort -n \
            | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR - 1) * 0.99) + 1]; else print 0 }')
    fi
    perf_stop
    kill "$PROXY_PID"
    wait "$PROXY_PID" 2>/dev/null || true
    PROXY_PID=
    local cpu_us
    cpu_us=$(awk -v b="$before" -v a="$after" -v n="$requests" -v hz="$CLK_TCK" \
        'BEGIN { if (n > 0) printf "%.1f", (a - b) / hz * 1e6 / n; else print "n/a" }')
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$proxy" "$label" "$rps" "$p99" "$cpu_us" "${ROUND:-1}" >>"$OUT/protocols.tsv"
    echo "    $rps req/s, p99 ${p99} us, CPU ${cpu_us} us/request ($requests requests)"
}

if [ "$proto_wanted" = true ]; then
    mkdir -p "$OUT/tls"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj /CN=localhost \
        -addext subjectAltName=DNS:localhost,IP:127.0.0.1 \
        -keyout "$OUT/tls/gateway.key" -out "$OUT/tls/gateway.crt" 2>/dev/null
    cat "$OUT/tls/gateway.crt" "$OUT/tls/gateway.key" >"$OUT/tls/gateway.pem"
    # h2load -i takes the scheme, host and port of the first line.
    head -n 20000 "$OUT/uniform.keys" | sed "s|^|http://127.0.0.1:$PROXY_PORT/k/|" >"$OUT/uniform.uris"
    # nginx: the same upstream, one server per protocol.
    nginx_proto_cfg() { # FILE LISTEN-OPTIONS HASH-VARIABLE
        sed -e "s|listen 127.0.0.1:$PROXY_PORT;|listen 127.0.0.1:$PROXY_PORT $2;\n        ssl_certificate $OUT/tls/gateway.crt;\n        ssl_certificate_key $OUT/tls/gateway.key;|" \
            -e "s|hash \\\$http_x_key consistent;|hash $3 consistent;|" \
            -e "s|hash \$http_x_key consistent;|hash $3 consistent;|" \
            -e "s|pid $OUT/nginx/nginx.pid;|pid $OUT/nginx/nginx-$4.pid;|" \
            "$OUT/nginx.conf" >"$1"
    }
    nginx_proto_cfg "$OUT/nginx-tls.conf" ssl '$http_x_key' tls
    nginx_proto_cfg "$OUT/nginx-h2c.conf" http2 '$request_uri' h2c
    haproxy_proto_cfg() { # FILE BIND-OPTIONS BALANCE
        sed -e "s|bind 127.0.0.1:$PROXY_PORT|bind 127.0.0.1:$PROXY_PORT $2|" \
            -e "s|balance hdr(X-Key)|balance $3|" "$OUT/haproxy.cfg" >"$1"
    }
    haproxy_proto_cfg "$OUT/haproxy-tls.cfg" "ssl crt $OUT/tls/gateway.pem" 'hdr(X-Key)'
    haproxy_proto_cfg "$OUT/haproxy-h2c.cfg" "proto h2" uri
    mapfile -t tls_args < <(loadring_args "$NGINX_SPEC" "$OUT/nginx.endpoints")
    mapfile -t h2c_args < <(loadring_args "$NGINX_SPEC" "$OUT/nginx.endpoints" | sed 's|^header:X-Key$|path|')
    proto_row() { # PROTOCOL INDEX: the INDEX-th proxy of PROTOCOL's row
        case $1:$2 in
        tls:0) run_proto tls-nginx "nginx ssl" tls -- "$NGINX" -p "$OUT/nginx" -e "$OUT/nginx/error.log" -c "$OUT/nginx-tls.conf" ;;
        tls:1) run_proto tls-haproxy "haproxy ssl crt" tls -- "$HAPROXY" -db -f "$OUT/haproxy-tls.cfg" ;;
        tls:2) run_proto tls-loadring "loadring --tls-cert" tls -- "$LOADRING" "${tls_args[@]}" \
            --tls-cert "$OUT/tls/gateway.crt" --tls-key "$OUT/tls/gateway.key" ;;
        h2c:0) run_proto h2c-nginx "nginx http2" h2c -- "$NGINX" -p "$OUT/nginx" -e "$OUT/nginx/error.log" -c "$OUT/nginx-h2c.conf" ;;
        h2c:1) run_proto h2c-haproxy "haproxy proto h2" h2c -- "$HAPROXY" -db -f "$OUT/haproxy-h2c.cfg" ;;
        h2c:2) run_proto h2c-loadring "loadring (auto h1/h2c)" h2c -- "$LOADRING" "${h2c_args[@]}" ;;
        esac
    }
    # As the uniform rows: each round starts one proxy further down.
    for protocol in tls h2c; do
        for round in $(seq "$ROUNDS"); do
            ROUND=$round
            for i in 0 1 2; do
                proto_row "$protocol" $(((i + round - 1) % 3))
            done
        done
    done
    ROUND=
    # Each proxy's medians (the middle sample, or the mean of the middle
    # two), its lowest and highest CPU, then every sample.
    median() { sort -g | awk '{ v[NR] = $1 } END { if (NR) print (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'; }
    {
        echo "| run | proxy | req/s | p99 (us) | CPU per request (us) | samples (CPU min-max) |"
        echo "|---|---|---:|---:|---:|---|"
        for proxy in $(cut -f1 "$OUT/protocols.tsv" | awk '!seen[$0]++'); do
            rows=$(awk -F'\t' -v p="$proxy" '$1 == p' "$OUT/protocols.tsv")
            label=$(echo "$rows" | head -n1 | cut -f2)
            rps=$(echo "$rows" | cut -f3 | median)
            p99=$(echo "$rows" | cut -f4 | median)
            cpu=$(echo "$rows" | cut -f5 | median)
            range=$(echo "$rows" | cut -f5 | sort -g | awk 'NR == 1 { lo = $1 } { hi = $1 } END { print lo "-" hi }')
            printf '| %s | %s | %.2f | %.0f | %.1f | %s (%s) |\n' "$proxy" "$label" "$rps" "$p99" "$cpu" \
                "$(echo "$rows" | wc -l)" "$range"
        done
        echo
        echo "| sample | round | req/s | p99 (us) | CPU per request (us) |"
        echo "|---|---:|---:|---:|---:|"
        awk -F'\t' '{ printf "| %s | %s | %s | %s | %s |\n", $1, $6, $3, $4, $5 }' "$OUT/protocols.tsv"
    } >"$OUT/protocols.md"
fi

echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/machine.txt"
echo
if [ -s "$OUT/runs.tsv" ]; then
    "$GATEBENCH" report "$OUT" --plot "$PLOT"
fi
if [ -s "$OUT/protocols.tsv" ]; then
    echo
    echo "protocols (uniform keys; TLS: wrk over https; h2c: h2load with prior knowledge):"
    cat "$OUT/protocols.md"
fi
if [ -s "$OUT/churn.tsv" ]; then
    echo
    echo "churn ($CHURN_COUNT endpoints, the endpoints file rewritten every 200 ms):"
    "$GATEBENCH" churn-report "$OUT"
fi
