#!/usr/bin/env bash
# Make a Docker engine available for the sandbox tests: install it if missing, register the crun
# runtime with it (the sandbox's runtime "auto" prefers crun: cheaper container start-up), start
# the engine if it does not answer, and wait (bounded) until `docker info` works. Safe to run
# again: a running engine whose config changed is told to reload it (SIGHUP; running containers
# are not touched).
set -euo pipefail

WAIT_S="${DOCKER_WAIT_S:-60}"
LOG="${DOCKERD_LOG:-/var/log/dockerd.log}"
CONFIG="${DOCKERD_CONFIG:-/etc/docker/daemon.json}"

export DEBIAN_FRONTEND=noninteractive
if ! command -v dockerd >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; then
    echo "install-docker: installing docker.io and debootstrap" >&2
    apt-get update -qq
    apt-get install -y -qq docker.io debootstrap >/dev/null
fi
if ! command -v crun >/dev/null 2>&1; then
    echo "install-docker: installing crun" >&2
    apt-get install -y -qq crun >/dev/null 2>&1 \
        || { apt-get update -qq && apt-get install -y -qq crun >/dev/null; } \
        || echo "install-docker: WARNING: crun could not be installed; sandboxes will use runc" >&2
fi

# crun refuses a cgroup v1 host whose cgroup2 mount still holds controllers ("hybrid mode not
# supported"). Where the v1 hierarchies are in use, give such controllers a v1 hierarchy of their
# own, as systemd's hybrid layout does (here typically hugetlb, which nothing mounted for v1).
crun_usable=0
if command -v crun >/dev/null 2>&1; then
    crun_usable=1
    unified=/sys/fs/cgroup/unified
    if [[ -d /sys/fs/cgroup/memory && -r $unified/cgroup.controllers ]]; then
        for controller in $(cat "$unified/cgroup.controllers"); do
            if [[ ! -d /sys/fs/cgroup/$controller ]] || ! mountpoint -q "/sys/fs/cgroup/$controller"; then
                echo "install-docker: mounting cgroup v1 controller $controller for crun" >&2
                mkdir -p "/sys/fs/cgroup/$controller"
                mount -t cgroup -o "$controller" cgroup "/sys/fs/cgroup/$controller" || true
            fi
        done
        if [[ -n "$(cat "$unified/cgroup.controllers")" ]]; then
            echo "install-docker: WARNING: cgroup2 still holds controllers" \
                "($(cat "$unified/cgroup.controllers")); not registering crun" >&2
            crun_usable=0
        fi
    fi
fi

# Register crun in the engine's config, keeping whatever else the config says.
config_changed=0
if (( crun_usable )); then
    mkdir -p "$(dirname "$CONFIG")"
    if [[ ! -s $CONFIG ]]; then
        printf '{\n  "runtimes": {"crun": {"path": "%s"}}\n}\n' "$(command -v crun)" >"$CONFIG"
        config_changed=1
    elif ! grep -q '"crun"' "$CONFIG"; then
        python3 - "$CONFIG" "$(command -v crun)" <<'EOF'
import json, sys
path, crun = sys.argv[1], sys.argv[2]
with open(path) as fh:
    config = json.load(fh)
config.setdefault("runtimes", {})["crun"] = {"path": crun}
with open(path, "w") as fh:
    json.dump(config, fh, indent=2)
    fh.write("\n")
EOF
        config_changed=1
    fi
    if (( config_changed )); then
        echo "install-docker: registered crun in $CONFIG" >&2
    fi
fi

engine_has_crun() {
    docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}' 2>/dev/null \
        | grep -qw crun
}

if docker info >/dev/null 2>&1; then
    if (( crun_usable )) && ! engine_has_crun; then
        pid="$(cat /var/run/docker.pid 2>/dev/null || pgrep -xo dockerd || true)"
        if [[ -n $pid ]]; then
            echo "install-docker: engine running; reloading its config (SIGHUP to $pid)" >&2
            kill -HUP "$pid"
            deadline=$((SECONDS + 15))
            until engine_has_crun; do
                if (( SECONDS >= deadline )); then
                    echo "install-docker: WARNING: the engine did not take up crun;" \
                        "sandboxes will use its default runtime" >&2
                    break
                fi
                sleep 0.5
            done
        fi
    fi
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
echo "install-docker: engine ready ($(docker version --format '{{.Server.Version}}')," \
    "runtimes: $(docker info --format '{{range $name, $_ := .Runtimes}}{{$name}} {{end}}'))" >&2
