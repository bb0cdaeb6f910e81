#!/usr/bin/env bash
# Starts or stops a Docker daemon for the image tests where no init system runs one (this project's
# machines and CI). It leaves the machine's network as it found it: no bridge, no iptables rules,
# no IP forwarding; containers use the host's network (`--network host`, loopback only).
#
# Usage: scripts/dockerd.sh start|stop
# `start` returns once the daemon answers (it does nothing when one already answers);
# `stop` ends only the daemon that `start` started (its pid is kept in /run/cutout-dockerd.pid).
set -euo pipefail
pidfile=/run/cutout-dockerd.pid
log=/var/tmp/cutout-dockerd.log
case "${1:-}" in
  start)
    if /usr/bin/docker info >/dev/null 2>&1; then echo "dockerd: already running"; exit 0; fi
    nohup /usr/sbin/dockerd --bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
      >"$log" 2>&1 &
    echo $! >"$pidfile"
    for _ in $(seq 1 60); do
      if /usr/bin/docker info >/dev/null 2>&1; then echo "dockerd: started (pid $(cat "$pidfile"))"; exit 0; fi
      sleep 1
    done
    echo "dockerd: did not answer within 60 s; its log:" >&2
    tail -20 "$log" >&2
    exit 1
    ;;
  stop)
    [ -f "$pidfile" ] || { echo "dockerd: not started by this script"; exit 0; }
    pid=$(cat "$pidfile")
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    rm -f "$pidfile"
    echo "dockerd: stopped"
    ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
