#!/usr/bin/env bash
# A school on one machine: Redis (the class room every replica shares), N app replicas on consecutive ports, and
# HAProxy in front of them, with session affinity. Foreground; Ctrl-C stops all of it. docs/school.md explains it.
#
#   LLM_EXPLORER_TEACHER_KEY='a long phrase' bash scripts/run-school.sh --replicas 3 --address 0.0.0.0
#
# Options (defaults in brackets):
#   --replicas N      app processes [2], each its own engine, on ports --first-port, +1, ...
#   --port P          HAProxy's port, the one address students open [8501]
#   --address A       where HAProxy listens [127.0.0.1]; 0.0.0.0 for the school network
#   --first-port P    the first replica's port (loopback only) [8601]
#   --redis-port P    Redis' port (loopback only) [6390]
#   --maxmemory M     Redis' memory limit; full, it refuses writes (noeviction), never drops a round [256mb]
#   --per-replica N   connections one replica takes at once (a tab holds one or two); more wait in HAProxy's
#                     queue up to 5 s, then get HAProxy's 503 page, not a hang [60]
#   --haproxy-config  print the HAProxy config these options make, and exit (the proxy tests start it)
# Environment:
#   SCHOOL_REDIS_PASSWORD   Redis' password [a random one for this run]
#   SCHOOL_ROOM             a Redis url (redis://:password@127.0.0.1:6390/0) already running: use it, start none
#                           (several classes, each its own run-school.sh, port and LLM_EXPLORER_CLASS_ID, one Redis)
#   SCHOOL_COOKIE_SECRET    Streamlit's server.cookieSecret, the same on every replica [a random one for this run]
#   LLM_EXPLORER_*          the app's settings, passed to every replica (LLM_EXPLORER_CLASS_ID names the class)
set -euo pipefail
cd "$(dirname "$0")/.."
export STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=${STREAMLIT_CLIENT_SHOW_ERROR_DETAILS:-none}  # .streamlit/config.toml: why

replicas=2 port=8501 address=127.0.0.1 first_port=8601 redis_port=6390 maxmemory=256mb per_replica=60 print_config=0
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas=$2 ;;
    --port) port=$2 ;;
    --address) address=$2 ;;
    --first-port) first_port=$2 ;;
    --redis-port) redis_port=$2 ;;
    --maxmemory) maxmemory=$2 ;;
    --per-replica) per_replica=$2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    --haproxy-config) print_config=1; shift; continue ;;
    *) echo "run-school.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
  shift 2
done
for value in "$replicas" "$port" "$first_port" "$redis_port" "$per_replica"; do
  [[ "$value" =~ ^[0-9]+$ ]] && [ "$value" -ge 1 ] || { echo "run-school.sh: $value is not a whole number >= 1" >&2; exit 2; }
done

# HAProxy's config: the tab's first GET / picks the replica with the fewest connections and a cookie keeps its
# websocket, its downloads and its reconnects there; a replica that fails its health check (or dies) is taken out
# and its tabs are sent to another (redispatch); past every replica's limit, a request waits 5 s, then gets a 503.
haproxy_config() {
  local servers="" i
  for i in $(seq 1 "$replicas"); do
    servers+="    server r$i 127.0.0.1:$((first_port + i - 1)) cookie r$i"$'\n'
  done
  cat <<EOF
global
    maxconn $((replicas * per_replica + 100))

defaults
    mode http
    option redispatch
    retries 2
    timeout connect 2s
    timeout client 60s
    timeout server 60s
    timeout queue 5s
    timeout http-request 10s
    timeout tunnel 8h

frontend school
    bind $address:$port
    default_backend replicas

backend replicas
    balance leastconn
    cookie SERVERID insert indirect nocache
    option httpchk GET /_stcore/health
    http-check expect status 200
    default-server check inter 2s fall 2 rise 1 maxconn $per_replica
$servers
EOF
}
[ "$print_config" = 1 ] && { haproxy_config; exit 0; }

find_binary() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || { [ -x "/usr/bin/$1" ] && echo "/usr/bin/$1"; } || true; }
redis_server=$(find_binary redis-server)
haproxy=$(find_binary haproxy)
[ -n "${SCHOOL_ROOM:-}" ] || [ -n "$redis_server" ] || { echo "run-school.sh: redis-server is missing (apt-get install redis-server)" >&2; exit 1; }
[ -n "$haproxy" ] || { echo "run-school.sh: haproxy is missing (apt-get install haproxy)" >&2; exit 1; }
[ -n "${LLM_EXPLORER_TEACHER_KEY:-}" ] || echo "note: LLM_EXPLORER_TEACHER_KEY is not set: no class mode (every page works, nobody can broadcast)" >&2

bash scripts/setup.sh
python=.venv/bin/python
random_secret() { "$python" -c 'import secrets; print(secrets.token_hex(24))'; }
password=${SCHOOL_REDIS_PASSWORD:-$(random_secret)}
cookie_secret=${SCHOOL_COOKIE_SECRET:-$(random_secret)}
class_id=${LLM_EXPLORER_CLASS_ID:-class}

run=$(mktemp -d "${TMPDIR:-/tmp}/llmx-school.XXXXXX")  # the generated configs (0600: they hold the password)
chmod 700 "$run"
pids=()
stop_all() {
  trap - INT TERM EXIT
  echo "stopping the school..."
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$run/redis.conf" "$run/haproxy.cfg" "$run/appendonlydir"  # the password, and this run's room
  echo "logs kept in $run"
}
trap stop_all EXIT
trap 'stop_all; exit 0' INT TERM

# 1. Redis: loopback only, a password, the room kept in an append-only file (a Redis restart keeps the rounds),
#    no snapshots, a memory limit that refuses writes when reached instead of evicting a class's keys.
umask 077
redis_pid=""
if [ -z "${SCHOOL_ROOM:-}" ]; then
cat > "$run/redis.conf" <<EOF
bind 127.0.0.1 -::1
port $redis_port
protected-mode yes
requirepass $password
daemonize no
save ""
appendonly yes
appendfsync everysec
dir $run
maxmemory $maxmemory
maxmemory-policy noeviction
EOF
"$redis_server" "$run/redis.conf" > "$run/redis.log" 2>&1 &
redis_pid=$!
pids+=("$redis_pid")
room_url="redis://:$password@127.0.0.1:$redis_port/0"
else
  room_url=$SCHOOL_ROOM
fi
room_where=$([ -n "${SCHOOL_ROOM:-}" ] && echo "the Redis of SCHOOL_ROOM" || echo "Redis on 127.0.0.1:$redis_port")
ROOM_URL=$room_url CLASS_ID=$class_id "$python" - <<'EOF'
import os, time
import redis
client = redis.Redis.from_url(os.environ["ROOM_URL"], socket_timeout=1)
for _ in range(100):
    try:
        client.ping()
        break
    except redis.ConnectionError:
        time.sleep(0.1)
else:
    raise SystemExit("run-school.sh: Redis did not start (see its log above)")
# A new school run starts a new fingerprint: its first replica writes it, a differing one is refused.
client.delete(f"llmx:{{{os.environ['CLASS_ID']}}}:fingerprint")
EOF

# 2. The replicas: loopback only, one engine each, the shared room, the same cookie secret.
for i in $(seq 1 "$replicas"); do
  replica_port=$((first_port + i - 1))
  LLM_EXPLORER_ROOM=$room_url STREAMLIT_SERVER_COOKIE_SECRET=$cookie_secret \
    "$python" -m streamlit run app.py --server.port "$replica_port" --server.address 127.0.0.1 \
    > "$run/replica$i.log" 2>&1 &
  pids+=($!)
done

# 3. HAProxy (haproxy_config above)
haproxy_config > "$run/haproxy.cfg"
"$haproxy" -c -q -f "$run/haproxy.cfg"
"$haproxy" -db -f "$run/haproxy.cfg" &
haproxy_pid=$!
pids+=("$haproxy_pid")

echo "school: http://$address:$port/ -> $replicas replicas on 127.0.0.1:$first_port..$((first_port + replicas - 1))," \
  "class '$class_id' in $room_where (logs in $run). Ctrl-C stops all."
# Until Ctrl-C, or until Redis or HAProxy stops (then all of it stops). A replica that dies is only taken out of
# HAProxy's list (its tabs reconnect to the others); as services, systemd restarts it (docs/school.md).
set +e
# shellcheck disable=SC2086
wait -n $redis_pid "$haproxy_pid"
echo "Redis or HAProxy stopped; the end of the logs:" >&2
tail -n 5 "$run"/*.log >&2
