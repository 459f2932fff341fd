#!/usr/bin/env bash
# Reference solution: kvctl with setsid+nohup detaching, a pid-file liveness check that
# treats zombies and reused pids as dead, SIGTERM for a clean (saving) stop.
set -euo pipefail
cat > /app/kv/kvctl <<'SH'
#!/bin/bash
# kvctl start|stop|status|restart - run /app/kv/kvserver.py as a daemon.
PIDFILE=/run/kv.pid
LOG=/var/log/kv.log
DATA=/var/lib/kv/data.json
URL=http://127.0.0.1:7070/health

running_pid() {  # prints the pid and succeeds when the pid file names a live kvserver
  local pid state
  pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
  [[ $pid =~ ^[0-9]+$ ]] || return 1
  state=$(sed 's/.*) //' "/proc/$pid/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$state" ] && [ "$state" != Z ] || return 1
  tr '\0' '\n' < "/proc/$pid/cmdline" 2>/dev/null | grep -q 'kvserver\.py$' || return 1
  echo "$pid"
}

healthy() { curl -fsS -m 1 "$URL" >/dev/null 2>&1; }

start() {
  running_pid >/dev/null && return 0
  mkdir -p "$(dirname "$DATA")" "$(dirname "$PIDFILE")" "$(dirname "$LOG")"
  setsid nohup python3 /app/kv/kvserver.py --port 7070 --data "$DATA" >>"$LOG" 2>&1 </dev/null &
  echo $! > "$PIDFILE"
  for _ in $(seq 100); do
    healthy && return 0
    running_pid >/dev/null || break
    sleep 0.1
  done
  echo "kvctl: server did not become healthy; see $LOG" >&2
  return 1
}

stop() {
  local pid
  if pid=$(running_pid); then
    kill -TERM "$pid"
    for _ in $(seq 150); do
      running_pid >/dev/null || break
      sleep 0.1
    done
    if running_pid >/dev/null; then
      echo "kvctl: server $pid did not stop" >&2
      return 1
    fi
  fi
  rm -f "$PIDFILE"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  restart) stop && start ;;
  status)
    if pid=$(running_pid); then echo "running $pid"; else echo stopped; exit 3; fi ;;
  *) echo "usage: kvctl start|stop|status|restart" >&2; exit 2 ;;
esac
SH
chmod 755 /app/kv/kvctl
/app/kv/kvctl start
