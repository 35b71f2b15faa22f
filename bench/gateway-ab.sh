#!/usr/bin/env bash
# bench/gateway-ab.sh: A/B of gateway binaries, interleaved, each alone on the
# machine's share in turn (BENCHMARKS.md, "Gateway", runtime layout).
#
#   bash bench/gateway-ab.sh nginx haproxy /path/to/loadring-A /path/to/loadring-B
#   bash bench/gateway-ab.sh direct nginx haproxy target/release/loadring
#
# Each argument is `nginx`, `haproxy`, a `loadring` binary, or `direct` (no
# proxy: wrk straight at the first backend, the ceiling the backends' service
# times set, against which each proxy's added latency shows); ROUNDS (2)
# rounds of all of them in order, each: the proxy on 127.0.0.1:BASE+80 in
# front of 8 `loadring-gatebench backends` (BASE+1..BASE+8, mean 5 ms),
# placing `X-Key` (loadring: nginx_hash:consistent=true; nginx: hash
# $http_x_key consistent, keepalive 256, as in bench/gateway.sh; HAProxy:
# balance hdr(X-Key), hash-type consistent, http-reuse always), a 1 s wrk
# warm-up, then
# `wrk -t2 -c256 -dSECS` (4) with the uniform keys of bench/gateway.sh. One
# line per run: req/s, p50/p99 ms, the proxy's CPU µs per request (utime +
# stime of its threads, and of its worker processes for nginx) and its split
# into user and system time, its context switches per request (voluntary: it
# waited for work; involuntary: it was preempted), the time its threads
# spent runnable but waiting for a CPU per request (schedstat's run delay)
# and the same for the backends' threads, the TCP segments the machine sent per request and the
# delayed ACKs among them (nstat: all processes, so only the difference
# between two proxies is the proxy's), the connections opened to the backends
# during the run (nstat's TcpActiveOpens less wrk's 256), peak RSS (VmHWM, kB, summed over
# nginx's processes), errors. A `direct` line has the load's figures, the
# backends' wait for a CPU and the machine's idle share (all CPUs, from
# /proc/stat) but no proxy's.
# Needs nginx or haproxy for their rows, wrk, curl, nstat (iproute2); builds loadring-gatebench (release) with cargo.
# Everything listens on 127.0.0.1; every process is stopped by pid on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${GATEBENCH_PORT:-19300}
ROUNDS=${ROUNDS:-2}
SECS=${SECS:-4}
PATH=$PATH:/usr/sbin:/sbin
needs=(wrk:wrk curl:curl python3:python3 nstat:iproute2)
for v in "$@"; do
    case $v in nginx | haproxy) needs+=("$v:$v") ;; esac
done
for tool in "${needs[@]}"; do
    command -v "${tool%%:*}" >/dev/null || { echo "missing ${tool%%:*}: apt-get install -y ${tool#*:}" >&2; exit 1; }
done
cargo build --release -q -p loadring-gatebench
GATEBENCH=${CARGO_TARGET_DIR:-$PWD/target}/release/loadring-gatebench
OUT=$(mktemp -d /tmp/gateway-ab.XXXXXX)
BP= PP=
trap 'for p in $PP $BP; do kill $p 2>/dev/null || true; wait $p 2>/dev/null || true; done' EXIT
"$GATEBENCH" keys --workload uniform --requests 200000 --keys 10000 --seed 42 --out "$OUT/uniform.keys"
"$GATEBENCH" backends --base-port $((BASE + 1)) --count 8 --admin-port "$BASE" --mean-ms 5 --seed 1 2>/dev/null &
BP=$!
args=() servers= nginx_servers=
for i in $(seq 8); do
    args+=(-e "127.0.0.1:$((BASE + i))")
    servers+="    server s$i 127.0.0.1:$((BASE + i)) id $i"$'\n'
    nginx_servers+="        server 127.0.0.1:$((BASE + i));"$'\n'
done
mkdir -p "$OUT/nginx"
. bench/gateway/nginx-conf.sh
nginx_conf "$OUT/nginx" $((BASE + 80)) "$nginx_servers" >"$OUT/nginx.conf"
printf 'global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n    http-reuse always\nfrontend front\n    bind 127.0.0.1:%s\n    default_backend pool\nbackend pool\n    balance hdr(X-Key)\n    hash-type consistent\n%s' \
    $((BASE + 80)) "$servers" >"$OUT/haproxy.cfg"
URL=http://127.0.0.1:$((BASE + 80))/
export GATEBENCH_KEYS=$OUT/uniform.keys GATEBENCH_THREADS=2
# The threads of PID and of its child processes (nginx's workers): utime
# and stime (ticks), voluntary and involuntary context switches; then the
# machine's TCP segments sent and delayed ACKs.
processes() { echo "$1" $(cat /proc/"$1"/task/*/children); }
snapshot() {
    local user=0 system=0 waited=0 preempted=0 queued=0 p t
    for t in $(for p in $(processes "$1"); do echo /proc/"$p"/task/*; done); do
        read -r -a stat < <(sed 's/.*) //' "$t/stat")
        read -r -a sched <"$t/schedstat"
        user=$((user + stat[11])) system=$((system + stat[12])) queued=$((queued + sched[1]))
        waited=$((waited + $(awk '/^voluntary_ctxt_switches/ { print $2 }' "$t/status")))
        preempted=$((preempted + $(awk '/^nonvoluntary_ctxt_switches/ { print $2 }' "$t/status")))
    done
    echo "$user $system $waited $preempted $queued $(nstat -az TcpOutSegs TcpExtDelayedACKs TcpActiveOpens |
        awk 'NR > 1 { v[$1] = $2 } END { printf "%s %s %s", v["TcpOutSegs"], v["TcpExtDelayedACKs"], v["TcpActiveOpens"] }')"
}
# The time the threads of PID waited to run (ns, schedstat).
queued() { local q=0 t; for t in /proc/"$1"/task/*; do read -r -a sched <"$t/schedstat"; q=$((q + sched[1])); done; echo $q; }
# The machine's idle and total jiffies (all CPUs).
idle_total() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print $5 + $6, t }' /proc/stat; }
for _ in $(seq "$ROUNDS"); do
    for v in "$@"; do
        if [ "$v" = direct ]; then
            url=http://127.0.0.1:$((BASE + 1))/
            wrk -t2 -c256 -d1s -s bench/gateway/keys.lua "$url" >/dev/null
            sleep 0.5
            i0=$(idle_total) b0=$(queued "$BP")
            wrk -t2 -c256 -d"${SECS}s" --timeout 2s -s bench/gateway/keys.lua "$url" >"$OUT/run.wrk"
            i1=$(idle_total) b1=$(queued "$BP")
            python3 - "$i0" "$i1" "$OUT/run.wrk" "$b0" "$b1" <<'P'
import json, re, sys
i0, i1, path, b0, b1 = sys.argv[1:]
g = json.loads(re.search(r'GATEBENCH (\{.*\})', open(path).read()).group(1))
(idle0, total0), (idle1, total1) = (map(int, x.split()) for x in (i0, i1))
err = sum(g[k] for k in ('err_connect', 'err_read', 'err_write', 'err_status', 'err_timeout'))
print(f"{'direct':>40} req/s {g['requests'] / (g['duration_us'] / 1e6):8.0f} p50 {g['p50_us']/1000:6.2f} "
      f"p99 {g['p99_us']/1000:6.2f} backends' runqueue_us/req {(int(b1) - int(b0)) / g['requests'] / 1e3:5.1f} "
      f"machine idle {(idle1 - idle0) / (total1 - total0):.0%} errors {err}")
P
            continue
        fi
        if [ "$v" = haproxy ]; then
            haproxy -db -f "$OUT/haproxy.cfg" >/dev/null 2>&1 &
        elif [ "$v" = nginx ]; then
            nginx -p "$OUT/nginx" -e "$OUT/nginx/error.log" -c "$OUT/nginx.conf" >/dev/null 2>&1 &
        else
            "$v" proxy --listen "127.0.0.1:$((BASE + 80))" --policy nginx_hash:consistent=true \
                --key header:X-Key "${args[@]}" 2>/dev/null &
        fi
        PP=$!
        for _ in $(seq 50); do curl -s -o /dev/null "$URL" && break; sleep 0.1; done
        wrk -t2 -c256 -d1s -s bench/gateway/keys.lua "$URL" >/dev/null
        sleep 0.5
        c0=$(snapshot "$PP") i0=$(idle_total) b0=$(queued "$BP")
        wrk -t2 -c256 -d"${SECS}s" --timeout 2s -s bench/gateway/keys.lua "$URL" >"$OUT/run.wrk"
        c1=$(snapshot "$PP") i1=$(idle_total) b1=$(queued "$BP")
        rss=0
        for p in $(processes "$PP"); do rss=$((rss + $(awk '/^VmHWM:/ { print $2 }' "/proc/$p/status"))); done
        kill "$PP"; wait "$PP" 2>/dev/null || true; PP=
        python3 - "$v" "$c0" "$c1" "$rss" "$OUT/run.wrk" "$i0" "$i1" "$b0" "$b1" <<'P'
import json, re, sys
v, c0, c1, rss, path, i0, i1, b0, b1 = sys.argv[1:]
(idle0, total0), (idle1, total1) = (map(int, x.split()) for x in (i0, i1))
g = json.loads(re.search(r'GATEBENCH (\{.*\})', open(path).read()).group(1))
rps = g['requests'] / (g['duration_us'] / 1e6)
n = g['requests']
user, system, waited, preempted, queued, segments, delayed, opens = (
    (int(b) - int(a)) / n for a, b in zip(c0.split(), c1.split()))
err = sum(g[k] for k in ('err_connect', 'err_read', 'err_write', 'err_status', 'err_timeout'))
print(f"{v:>40} req/s {rps:8.0f} p50 {g['p50_us']/1000:6.2f} p99 {g['p99_us']/1000:6.2f} "
      f"cpu_us/req {(user + system) * 1e4:5.1f} (user {user * 1e4:4.1f} sys {system * 1e4:4.1f}) "
      f"switches/req {waited:.3f}+{preempted:.3f} runqueue_us/req {queued / 1e3:5.1f} "
      f"(backends' {(int(b1) - int(b0)) / n / 1e3:5.1f}) segments/req {segments:.2f} (delayed acks {delayed:.3f}) "
      f"connects {opens * n - 256:.0f} peak_rss_kB {rss} machine idle {(idle1 - idle0) / (total1 - total0):.0%} errors {err}")
P
    done
done
