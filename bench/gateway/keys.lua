-- wrk script of bench/gateway.sh: every request is `GET /` with header
-- X-Key taken in turn from the file $GATEBENCH_KEYS (one key per line, made
-- by `loadring-gatebench keys`, seeded). Thread i of $GATEBENCH_THREADS
-- starts at i/threads of the file and wraps around. Requests are formatted
-- once, in init, so the load tool spends its CPU on sending them.
-- When done, one line `GATEBENCH {json}` with the counts and latencies (us).

local file = os.getenv("GATEBENCH_KEYS")
local threads = tonumber(os.getenv("GATEBENCH_THREADS") or "1")
local created = 0

function setup(thread)
  thread:set("tid", created)
  created = created + 1
end

local requests = {}
local n = 0
local i = 0

function init(args)
  for key in io.lines(file) do
    n = n + 1
    requests[n] = wrk.format("GET", "/", { ["X-Key"] = key })
  end
  i = math.floor(n * tid / threads)
end

function request()
  i = i + 1
  if i > n then i = 1 end
  return requests[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'GATEBENCH {"requests":%d,"duration_us":%d,"p50_us":%.1f,"p99_us":%.1f,"p999_us":%.1f,'
      .. '"err_connect":%d,"err_read":%d,"err_write":%d,"err_status":%d,"err_timeout":%d}\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(99),
    latency:percentile(99.9), e.connect, e.read, e.write, e.status, e.timeout))
end
