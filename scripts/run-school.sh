#!/usr/bin/env bash
# A school on one machine: Redis (the class room every replica shares), N app replicas on consecutive ports, and
# HAProxy in front of them, with session affinity. Foreground; it restarts Redis, HAProxy or a replica that exits
# (a Redis restart keeps the rounds: the append-only file), and Ctrl-C stops all of it, keeping the room's data
# unless --drop-room. docs/school.md explains it.
#
#   LLM_EXPLORER_TEACHER_KEY='a long phrase' bash scripts/run-school.sh --replicas 3 --address 0.0.0.0
#
# Options (defaults in brackets):
#   --address A       where HAProxy listens, asked every time: 0.0.0.0 for the school network (plain HTTP: the
#                     teacher key can be read on it), 127.0.0.1 for this machine only
#   --replicas N      app processes [2], each its own engine, on ports --first-port, +1, ...
#   --port P          HAProxy's port, the one address students open [8501]
#   --first-port P    the first replica's port (loopback only) [8601]
#   --redis-port P    Redis' port (loopback only) [6390]
#   --maxmemory M     Redis' memory limit; full, it refuses writes (noeviction), never drops a round [256mb]
#   --per-replica N   connections one replica takes at once (a tab holds one or two); more wait in HAProxy's
#                     queue up to 5 s, then get HAProxy's 503 page, not a hang [60]
#   --data DIR        Redis' append-only file, kept after Ctrl-C: the next school on this Redis port finds the
#                     rounds [${XDG_STATE_HOME:-~/.local/state}/llm-explorer/redis-<redis port>]
#   --drop-room       at the end (Ctrl-C), delete this class's room (its rounds, broadcast, teacher tokens)
#   --app FILE        the Streamlit script each replica runs [app.py] (the script's own test runs a tiny one)
#   --haproxy-config  print the HAProxy config these options make, and exit (the proxy tests start it)
# Environment:
#   SCHOOL_REDIS_PASSWORD   Redis' password [a random one for this run]
#   SCHOOL_ROOM             a Redis url (redis://:password@127.0.0.1:6390/0) already running: use it, start none
#                           (several classes, each its own run-school.sh, port and LLM_EXPLORER_CLASS_ID, one Redis)
#   SCHOOL_COOKIE_SECRET    Streamlit's server.cookieSecret, the same on every replica [a random one for this run]
#   SCHOOL_PYTHON           a Python with the app's requirements installed, used as it is [.venv/bin/python, after
#                           scripts/setup.sh]
#   LLM_EXPLORER_*          the app's settings, passed to every replica (LLM_EXPLORER_CLASS_ID names the class)
set -euo pipefail
if ((BASH_VERSINFO[0] < 5 || (BASH_VERSINFO[0] == 5 && BASH_VERSINFO[1] < 1))); then
  echo "run-school.sh: needs bash 5.1 or later (its supervisor waits with wait -n -p); this is $BASH_VERSION" >&2
  exit 1
fi
self=$(readlink -f "$0")
cd "$(dirname "$0")/.."
export STREAMLIT_CLIENT_SHOW_ERROR_DETAILS=${STREAMLIT_CLIENT_SHOW_ERROR_DETAILS:-none}  # .streamlit/config.toml: why

replicas=2 port=8501 address="" first_port=8601 redis_port=6390 maxmemory=256mb per_replica=60 print_config=0
data="" drop_room=0 app=app.py
while [ $# -gt 0 ]; do
  case "$1" in
    --replicas) replicas=$2 ;;
    --port) port=$2 ;;
    --address) address=$2 ;;
    --first-port) first_port=$2 ;;
    --redis-port) redis_port=$2 ;;
    --maxmemory) maxmemory=$2 ;;
    --per-replica) per_replica=$2 ;;
    --data) data=$2 ;;
    --app) app=$2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/p}' "$self"; exit 0 ;;
    --drop-room) drop_room=1; shift; continue ;;
    --haproxy-config) print_config=1; shift; continue ;;
    *) echo "run-school.sh: unknown option $1 (--help lists them)" >&2; exit 2 ;;
  esac
  [ $# -ge 2 ] || { echo "run-school.sh: $1 needs a value (--help lists them)" >&2; exit 2; }
  shift 2
done
for value in "$replicas" "$port" "$first_port" "$redis_port" "$per_replica"; do
  [[ "$value" =~ ^[0-9]+$ ]] && [ "$value" -ge 1 ] || { echo "run-school.sh: $value is not a whole number >= 1" >&2; exit 2; }
done
if [ -z "$address" ]; then
  echo "run-school.sh: say where students reach the school: --address 0.0.0.0 (every network of this machine)," \
    "an address of this machine, or 127.0.0.1 (this machine only)" >&2
  exit 2
fi

# HAProxy's config: the tab's first GET / picks the replica with the fewest connections and a cookie keeps its
# websocket, its downloads and its reconnects there; a replica that fails its health check (or dies) is taken out
# and its tabs are sent to another (redispatch); past every replica's limit, a request waits 5 s, then gets a 503.
# X-Forwarded-For is HAProxy's own (any the client sent is replaced): the replicas key the teacher-key back-off on it.
haproxy_config() {
  local servers="" i
  for i in $(seq 1 "$replicas"); do
    servers+="    server r$i 127.0.0.1:$((first_port + i - 1)) cookie r$i"$'\n'
  done
  cat <<CONFIG
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
    http-request set-header X-Forwarded-For %[src]
    default_backend replicas

backend replicas
    balance leastconn
    cookie SERVERID insert indirect nocache
    option httpchk GET /_stcore/health
    http-check expect status 200
    default-server check inter 2s fall 2 rise 1 maxconn $per_replica
$servers
CONFIG
}
[ "$print_config" = 1 ] && { haproxy_config; exit 0; }

find_binary() { command -v "$1" 2>/dev/null || { [ -x "/usr/sbin/$1" ] && echo "/usr/sbin/$1"; } || { [ -x "/usr/bin/$1" ] && echo "/usr/bin/$1"; } || true; }
redis_server=$(find_binary redis-server)
haproxy=$(find_binary haproxy)
[ -n "${SCHOOL_ROOM:-}" ] || [ -n "$redis_server" ] || { echo "run-school.sh: redis-server is missing (apt-get install redis-server)" >&2; exit 1; }
[ -n "$haproxy" ] || { echo "run-school.sh: haproxy is missing (apt-get install haproxy)" >&2; exit 1; }
[ -f "$app" ] || { echo "run-school.sh: no Streamlit script at $app" >&2; exit 2; }
port_taken() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
busy=""
for p in "$port" $([ -n "${SCHOOL_ROOM:-}" ] || echo "$redis_port") $(seq "$first_port" $((first_port + replicas - 1))); do
  port_taken "$p" && busy+=" $p"
done
[ -z "$busy" ] || { echo "run-school.sh: port(s)$busy already in use (another school? choose others: --help)" >&2; exit 1; }
if [ -z "${LLM_EXPLORER_TEACHER_KEY:-}" ]; then
  echo "note: LLM_EXPLORER_TEACHER_KEY is not set: no class mode (every page works, nobody can broadcast)" >&2
elif [[ ! "$address" =~ ^(127\.|localhost$|::1$) ]]; then
  echo "warning: the school is plain HTTP on $address:$port: anyone on that network can read the teacher key as the" \
    "teacher sends it, and the teacher's cookie. Use a network you trust, or TLS in front (docs/school.md)." >&2
fi

if [ -n "${SCHOOL_PYTHON:-}" ]; then
  python=$SCHOOL_PYTHON
else
  bash scripts/setup.sh
  python=.venv/bin/python
fi
random_secret() { "$python" -c 'import secrets; print(secrets.token_hex(24))'; }
password=${SCHOOL_REDIS_PASSWORD:-$(random_secret)}
cookie_secret=${SCHOOL_COOKIE_SECRET:-$(random_secret)}
class_id=${LLM_EXPLORER_CLASS_ID:-class}
data=${data:-${XDG_STATE_HOME:-$HOME/.local/state}/llm-explorer/redis-$redis_port}

umask 077
run=$(mktemp -d "${TMPDIR:-/tmp}/llmx-school.XXXXXX")  # the generated configs (0600: they hold the password), logs
if [ -z "${SCHOOL_ROOM:-}" ]; then
  room_url="redis://:$password@127.0.0.1:$redis_port/0"
  room_where="Redis on 127.0.0.1:$redis_port (its data in $data)"
else
  room_url=$SCHOOL_ROOM
  room_where="the Redis of SCHOOL_ROOM"
fi

# What runs, by name: redis (unless SCHOOL_ROOM), replica1..N, haproxy. Each is started by start_one and started
# again when it exits, after a pause that doubles (0.2 s up to 30 s) while it keeps exiting within 10 s of its start.
declare -A pid_of=() started_at=() pause_of=()
start_one() {
  local name=$1
  case "$name" in
    redis) "$redis_server" "$run/redis.conf" >> "$run/redis.log" 2>&1 & ;;
    haproxy) "$haproxy" -db -f "$run/haproxy.cfg" >> "$run/haproxy.log" 2>&1 & ;;
    replica*)
      LLM_EXPLORER_ROOM=$room_url STREAMLIT_SERVER_COOKIE_SECRET=$cookie_secret \
        "$python" -m streamlit run "$app" --server.port $((first_port + ${name#replica} - 1)) \
        --server.address 127.0.0.1 >> "$run/$name.log" 2>&1 & ;;
  esac
  pid_of[$name]=$!
  started_at[$name]=$SECONDS
}

drop_room() {
  ROOM_URL=$room_url CLASS_ID=$class_id "$python" - <<'PY' || echo "run-school.sh: the class's room could not be dropped (Redis out of reach): it is kept" >&2
import os
import redis
client = redis.Redis.from_url(os.environ["ROOM_URL"], socket_timeout=2)
keys = list(client.scan_iter(match=f"llmx:{{{os.environ['CLASS_ID']}}}:*", count=1000))
if keys:
    client.delete(*keys)
print(f"dropped class {os.environ['CLASS_ID']!r}'s room ({len(keys)} keys)")
PY
}

stop_all() {
  trap - INT TERM EXIT
  echo "stopping the school..."
  [ "$drop_room" = 1 ] && drop_room
  local pid
  for pid in "${pid_of[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${pid_of[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -f "$run/redis.conf" "$run/haproxy.cfg"  # the password
  [ -n "${SCHOOL_ROOM:-}" ] || [ "$drop_room" = 1 ] || echo "the room is kept in $data (--drop-room drops it)"
  echo "logs kept in $run"
}
trap stop_all EXIT
trap 'stop_all; exit 0' INT TERM

# 1. Redis: loopback only, a password, the room kept in an append-only file in $data (a Redis restart, or the next
#    school on this port, finds the rounds), no snapshots, a memory limit that refuses writes when reached instead of
#    evicting a class's keys. Every write is in the file before Redis answers (appendfsync everysec: a Redis killed
#    loses nothing it answered; only a power cut loses up to the last second).
if [ -z "${SCHOOL_ROOM:-}" ]; then
  mkdir -p "$data"
  cat > "$run/redis.conf" <<CONFIG
bind 127.0.0.1 -::1
port $redis_port
protected-mode yes
requirepass $password
daemonize no
save ""
appendonly yes
appendfsync everysec
dir $data
maxmemory $maxmemory
maxmemory-policy noeviction
CONFIG
  start_one redis
fi
ROOM_URL=$room_url CLASS_ID=$class_id "$python" - <<'PY'
import os, time
import redis
client = redis.Redis.from_url(os.environ["ROOM_URL"], socket_timeout=1)
deadline = time.monotonic() + 30  # a long append-only file takes a while to load
while True:
    try:
        client.ping()
        break
    except (redis.ConnectionError, redis.BusyLoadingError) as error:
        if time.monotonic() > deadline:
            raise SystemExit(f"run-school.sh: Redis did not answer within 30 s ({error}); its log is in the run folder")
        time.sleep(0.1)
    except redis.RedisError as error:
        raise SystemExit(f"run-school.sh: Redis refused this school ({error})")
# A new school run starts a new fingerprint: its first replica writes it, a differing one is refused.
client.delete(f"llmx:{{{os.environ['CLASS_ID']}}}:fingerprint")
PY

# 2. The replicas: loopback only, one engine each, the shared room, the same cookie secret.
for i in $(seq 1 "$replicas"); do start_one "replica$i"; done

# 3. HAProxy (haproxy_config above)
haproxy_config > "$run/haproxy.cfg"
"$haproxy" -c -q -f "$run/haproxy.cfg"
start_one haproxy

echo "school: http://$address:$port/ -> $replicas replicas on 127.0.0.1:$first_port..$((first_port + replicas - 1))," \
  "class '$class_id' in $room_where (logs in $run). Ctrl-C stops all."

# 4. Supervise until Ctrl-C: whatever exits is started again. While Redis is down the class panels say they are
#    paused (every page works); the replicas reconnect by themselves. While HAProxy is down the tabs reconnect.
set +e
while true; do
  died=""
  wait -n -p died "${pid_of[@]}"  # a child exited (a trapped signal interrupts this: the trap stops all and exits)
  code=$?
  for name in "${!pid_of[@]}"; do
    [ "${pid_of[$name]}" = "$died" ] || continue
    if [ $((SECONDS - started_at[$name])) -ge 10 ]; then pause_of[$name]=2; else
      pause_of[$name]=$(( ${pause_of[$name]:-1} * 2 > 300 ? 300 : ${pause_of[$name]:-1} * 2 ))
    fi
    pause="$((pause_of[$name] / 10)).$((pause_of[$name] % 10))"
    echo "$(date +%T) $name exited (code $code); starting it again in $pause s. The end of its log:" >&2
    tail -n 3 "$run/$name.log" >&2
    sleep "$pause" &
    wait $!
    start_one "$name"
  done
done
