#!/usr/bin/env python3
"""Records placements of a real HAProxy as vector files for `cargo test`.

    python3 scripts/record_haproxy_vectors.py HAPROXY_BINARY OUT_DIR

Each scenario below starts HTTP backends on 127.0.0.1 that answer with their
own `127.0.0.1:PORT`, an HAProxy (`balance hdr(X-Key)`, `hash-type
consistent`, the scenario's `hash-key` and servers) in the foreground, sends
it 1,000 keys and writes what each reached as
`OUT_DIR/haproxy_live_<scenario>.tsv`, in the format of
`crates/loadring/tests/data` (a `# policy:` line, `# endpoint:` lines, then
`key<TAB>endpoint`). A scenario whose `hash-key` the binary does not have
(older than `min_version`) is skipped with a note. Nothing leaves loopback;
HAProxy and the backends are stopped by this script when it ends.

It is how `haproxy_live_K*.tsv` were made (HAProxy 3.5-dev5 and 3.3-dev9
built from source with `make TARGET=linux-glibc USE_OPENSSL= USE_LUA=`):
Debian's HAProxy (2.6) has no `hash-key`.
"""

import http.client
import http.server
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

KEYS = 1000

# name, minimum HAProxy version, hash-key line (None: none), loadring
# hash_key= (None: the default), servers as (weight, extra server words,
# extra loadring endpoint attributes), with fixed ports from BASE_PORT.
SCENARIOS = [
    ("K1_addr_port_5srv", (3, 0), "addr-port", "addr-port",
     [(1, "", ""), (2, "", ""), (1, "", ""), (3, "", ""), (1, "", "")]),
    # Every server on 127.0.0.1: under `addr` their nodes share keys, and
    # HAProxy's order among equal keys decides.
    ("K2_addr_same_ip_3srv", (3, 0), "addr", "addr",
     [(1, "", ""), (2, "", ""), (1, "", "")]),
    ("K3_id32_4srv", (3, 4), "id32", "id32",
     [(1, "", ""), (2, " id 7", " hash_key=7"), (1, "", ""), (1, " id 3", " hash_key=3")]),
    ("K4_guid_4srv", (3, 4), "guid", "guid",
     [(1, " guid cache-a", " hash_key=cache-a"), (2, " guid cache.b:2", " hash_key=cache.b:2"),
      (1, "", ""), (1, " guid C_3-x", " hash_key=C_3-x")]),
    # No hash-key line on a release between 3.0 and 3.3-dev9: `id` hashed.
    ("K5_default_id_3_0_4srv", (3, 0), None, "id-3.0",
     [(1, "", ""), (2, " id 5", " hash_key=5"), (1, "", ""), (3, "", "")]),
]

BASE_PORT = 19301


def version(binary):
    line = subprocess.run([binary, "-v"], capture_output=True, text=True).stdout.splitlines()[0]
    m = re.search(r"version (\d+)\.(\d+)(?:-dev(\d+))?", line)
    return line, (int(m.group(1)), int(m.group(2))), m.group(3)


def backend(port):
    addr = f"127.0.0.1:{port}".encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", str(len(addr)))
            self.end_headers()
            self.wfile.write(addr)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def record(binary, out_dir, scenario, version_line):
    name, _, haproxy_key, loadring_key, servers = scenario
    ports = [BASE_PORT + i for i in range(len(servers))]
    backends = [backend(p) for p in ports]
    front = free_port()
    with tempfile.TemporaryDirectory() as tmp:
        lines = "".join(
            f"    server s{i} 127.0.0.1:{p} weight {w}{extra}\n"
            for i, ((w, extra, _), p) in enumerate(zip(servers, ports))
        )
        key_line = f"    default-server hash-key {haproxy_key}\n" if haproxy_key else ""
        cfg = os.path.join(tmp, "haproxy.cfg")
        with open(cfg, "w") as f:
            f.write(
                "global\n    maxconn 64\n"
                "defaults\n    mode http\n    timeout connect 5s\n"
                "    timeout client 10s\n    timeout server 10s\n"
                f"frontend front\n    bind 127.0.0.1:{front}\n    default_backend pool\n"
                "backend pool\n    balance hdr(X-Key)\n    hash-type consistent\n"
                f"{key_line}{lines}"
            )
        daemon = subprocess.Popen([binary, "-db", "-f", cfg], stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(tmp, "log"), "w"))
        try:
            deadline = time.monotonic() + 20
            while True:
                try:
                    socket.create_connection(("127.0.0.1", front), timeout=1).close()
                    break
                except OSError:
                    if daemon.poll() is not None or time.monotonic() > deadline:
                        sys.exit(f"{name}: HAProxy did not start:\n" + open(os.path.join(tmp, "log")).read())
                    time.sleep(0.05)
            placed = []
            conn = http.client.HTTPConnection("127.0.0.1", front, timeout=10)
            for k in range(KEYS):
                key = f"key-{k}"
                conn.request("GET", "/", headers={"X-Key": key})
                placed.append((key, conn.getresponse().read().decode()))
            conn.close()
        finally:
            daemon.kill()
            daemon.wait()
            for b in backends:
                b.shutdown()
                b.server_close()
    spec = "haproxy_hash:type=consistent" + (f" hash_key={loadring_key}" if loadring_key else "")
    path = os.path.join(out_dir, f"haproxy_live_{name}.tsv")
    with open(path, "w") as f:
        f.write(f"# REAL {version_line.split(' - ')[0]} placement observed live "
                f"(balance hdr(X-Key), hash-type consistent, "
                f"{'default-server hash-key ' + haproxy_key if haproxy_key else 'no hash-key line'})\n")
        f.write(f"# policy: {spec}\n")
        for (w, _, attrs), p in zip(servers, ports):
            f.write(f"# endpoint: 127.0.0.1:{p} weight={w}{attrs}\n")
        f.write("# input: keys\n")
        for key, addr in placed:
            f.write(f"{key}\t{addr}\n")
    print(f"wrote {path}: {len(set(a for _, a in placed))} servers reached")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, out_dir = sys.argv[1], sys.argv[2]
    line, (major, minor), dev = version(binary)
    # 3.0 to 3.3-dev9 hash the id; the fix (3.3-dev10) reached the stable
    # branches at a point release, so K5 is recorded only on a dev build.
    hashed_id = dev is not None and ((major, minor) < (3, 3) or ((major, minor) == (3, 3) and int(dev) < 10))
    for scenario in SCENARIOS:
        name, min_version = scenario[0], scenario[1]
        if (major, minor) < min_version:
            print(f"{name}: skipped, {line.split(' - ')[0]} has no such hash-key")
        elif name.startswith("K5") and not hashed_id:
            print(f"{name}: skipped, {line.split(' - ')[0]} does not hash the id")
        else:
            record(binary, out_dir, scenario, line)


if __name__ == "__main__":
    main()
