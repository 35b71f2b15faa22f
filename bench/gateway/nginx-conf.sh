# Sourced by bench/gateway.sh and bench/gateway-ab.sh: the nginx both
# compare loadring with (BENCHMARKS.md, "Gateway", Setup).

# nginx_conf DIR PORT SERVERS: the configuration, on stdout, of an nginx
# listening on 127.0.0.1:PORT with its pid, logs and temporary files in
# DIR, placing `X-Key` with `hash $http_x_key consistent` over SERVERS
# (its `server ADDRESS;` lines), 256 idle upstream connections kept per
# worker, one worker per CPU.
nginx_conf() {
    cat <<EOF
daemon off;
master_process on;
worker_processes auto;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $1/body;
    proxy_temp_path $1/proxy;
    fastcgi_temp_path $1/fastcgi;
    uwsgi_temp_path $1/uwsgi;
    scgi_temp_path $1/scgi;
    upstream pool {
        hash \$http_x_key consistent;
$3        keepalive 256;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$2;
        location / {
            proxy_pass http://pool;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }
    }
}
EOF
}
