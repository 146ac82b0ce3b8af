#!/usr/bin/env bash
# Make a Docker engine available for the sandbox tests: install it if missing, start it if it
# does not answer, and wait (bounded) until `docker info` works. Safe to run again.
set -euo pipefail

WAIT_S="${DOCKER_WAIT_S:-60}"
LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"

if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    echo "install-docker: installing docker.io and debootstrap" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq docker.io debootstrap >/dev/null
fi

if docker info >/dev/null 2>&1; then
    echo "install-docker: engine already running" >&2
    exit 0
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
    echo "install-docker: starting dockerd (log: $LOG)" >&2
    # A dead engine can leave its pid file behind, and then dockerd refuses to start.
    rm -f /var/run/docker.pid
    setsid dockerd >"$LOG" 2>&1 </dev/null &
fi

deadline=$((SECONDS + WAIT_S))
until docker info >/dev/null 2>&1; do
    if (( SECONDS >= deadline )); then
        echo "install-docker: ERROR: the Docker engine did not answer within ${WAIT_S}s." >&2
        echo "install-docker: last lines of $LOG:" >&2
        tail -n 20 "$LOG" >&2 || true
        exit 1
    fi
    sleep 0.5
done
echo "install-docker: engine ready ($(docker version --format '{{.Server.Version}}'))" >&2
