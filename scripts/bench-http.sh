#!/usr/bin/env bash
# bench-http.sh: course-page latency (p50/p99) and throughput of `commlab serve` at 50 and
# 500 concurrent clients, side by side with nginx serving the same pages as static files,
# in one run on this machine. Targets: p99 < 5 ms at 500 clients, throughput >= 0.8x nginx.
set -euo pipefail
cd "$(dirname "$0")/.."
DUR=${DUR:-10s}
BIN=bin/commlab
for c in wrk nginx curl; do command -v $c >/dev/null || [ -x /usr/sbin/$c ] || { echo "bench-http: $c missing (make bench installs it)" >&2; exit 1; }; done
[ -x $BIN ] || make -s build

work=$(mktemp -d)
cleanup() { kill "${cl_pid:-}" 2>/dev/null || true; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
CP=$(free_port); NP=$(free_port)
$BIN serve --addr 127.0.0.1:$CP --data "$work/data" --log-level warn &
cl_pid=$!
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$CP/healthz" >/dev/null && break; sleep 0.1; done

# The pages: the index and every written chapter, saved byte for byte for nginx.
paths=(/course $(curl -fs "http://127.0.0.1:$CP/course" | { grep -o 'href="/course/ch[0-9]*"' || true; } | sed 's/href="//; s/"//' | sort -u))
for p in "${paths[@]}"; do mkdir -p "$work/www$p"; curl -fs "http://127.0.0.1:$CP$p" > "$work/www$p/index.html"; done
cat > "$work/nginx.conf" <<NGX
worker_processes 2;
pid $work/nginx.pid;
error_log $work/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on; tcp_nopush on; keepalive_requests 100000;
  types { text/html html; }
  server { listen 127.0.0.1:$NP; root $work/www; default_type "text/html; charset=utf-8";
           location / { try_files \$uri/index.html =404; } }
}
NGX
nginx -c "$work/nginx.conf"
for _ in $(seq 50); do curl -fs "http://127.0.0.1:$NP/course" >/dev/null && break; sleep 0.1; done

# wrk rotates through the pages.
{ echo 'local paths = {'; for p in "${paths[@]}"; do echo "  \"$p\","; done; echo '}'
  echo 'local i = 0'
  echo 'request = function() i = i % #paths + 1; return wrk.format("GET", paths[i]) end'; } > "$work/pages.lua"

to_ms() { awk -v v="$1" 'BEGIN{ if (v ~ /us$/) { sub(/us$/,"",v); print v/1000 } else if (v ~ /ms$/) { sub(/ms$/,"",v); print v } else { sub(/s$/,"",v); print v*1000 } }'; }
run() { # url conns -> "p50 p99 rps"
  local out; out=$(wrk -t2 -c"$2" -d"$DUR" --latency -s "$work/pages.lua" "$1")
  local p50 p99 rps
  p50=$(echo "$out" | awk '$1=="50%"{print $2}'); p99=$(echo "$out" | awk '$1=="99%"{print $2}')
  rps=$(echo "$out" | awk '/Requests\/sec/{print $2}')
  echo "$(to_ms "$p50") $(to_ms "$p99") $rps"
}
echo "pages: ${#paths[@]} (${paths[*]}), $DUR per run, wrk -t2, $(nproc) cores"
printf '%-8s %-8s %10s %10s %12s\n' clients server p50_ms p99_ms req_per_s
for conns in 50 500; do
  read -r cp50 cp99 crps <<<"$(run "http://127.0.0.1:$CP" $conns)"
  read -r np50 np99 nrps <<<"$(run "http://127.0.0.1:$NP" $conns)"
  printf '%-8s %-8s %10.2f %10.2f %12.0f\n' $conns commlab "$cp50" "$cp99" "$crps"
  printf '%-8s %-8s %10.2f %10.2f %12.0f\n' $conns nginx "$np50" "$np99" "$nrps"
  awk -v c="$crps" -v n="$nrps" -v p="$cp99" -v k=$conns 'BEGIN{ printf "%-8s ratio    throughput commlab/nginx = %.2f (target >= 0.80)%s\n", k, c/n, (k==500 ? sprintf(", commlab p99 %.2f ms (target < 5)", p) : "") }'
done
