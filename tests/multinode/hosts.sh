#!/usr/bin/env bash
# Several "hosts" on this machine for one test, sourced by a test script, which then calls
#   hosts_up DIR nodeA nodeB [...]   (DIR outside /tmp) makes one network namespace per host (own
#                                    interfaces, address 198.18.0.<i>/15 from the RFC 2544 range),
#                                    joined by a bridge that lives in a namespace of its own, so no
#                                    interface of the machine itself is created, changed or used;
#                                    writes DIR/on, DIR/rsh and DIR/hosts (below); exports
#                                    HOSTS_DIR, OMPI_MCA_plm_rsh_agent and the OpenMPI settings
#   on HOST CMD ARGS...              runs CMD as if on HOST (after hosts_up; DIR/on from outside)
#   hosts_down                       kills what still runs in the namespaces and deletes them
#                                    (also on exit, through the trap hosts_up sets, so a failing
#                                    test leaves nothing behind; a test killed outright, as ctest
#                                    does at its TIMEOUT, is cleaned up by the next hosts_up)
# Each command started on a host gets, besides the host's network namespace (entered with nsenter:
# `ip netns exec` would also mount a fresh /sys, hiding /sys/fs/cgroup, which slurmd needs), a
# UTS namespace whose hostname is the host's name (OpenMPI and Slurm tell hosts apart by it) and a
# mount namespace in which /etc/hosts names every host and /tmp is the host's own folder DIR/HOST/tmp
# (node-local files stay on their node); everything else, the build and the test's folder included,
# is shared, like a cluster's shared file system. Processes see each other (one PID namespace).
# OpenMPI reaches another host through DIR/rsh (`--mca plm_rsh_agent`): it runs the remote command
# through a shell on that host, as ssh would, so no ssh server is needed.
# Namespace names carry the test's PID and a random number, so parallel tests never collide; the
# addresses may repeat between tests, since each test's bridge is its own.
# Needs root (ip netns add): without it hosts_up prints "skipped: ..." and exits 0, which ctest
# reports as a skip; where CI=true it fails instead (CI runs as root and must run these tests).

hosts_names=()
hosts_prefix=""

hosts_skip() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $* (CI=true: these tests must run in CI)"
    exit 1
  fi
  echo "skipped: $*"
  exit 0
}

# Every command may fail (a process that ended meanwhile) without stopping the cleanup: the calling
# script may run under set -e.
hosts_down() {
  local ns pid
  [ -n "$hosts_prefix" ] || return 0
  for ns in "${hosts_names[@]/#/$hosts_prefix-}" "$hosts_prefix-br"; do
    [ -e "/run/netns/$ns" ] || continue
    # Only processes inside this test's namespaces: those it started.
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -TERM "$pid" 2>/dev/null || true; done
  done
  for ns in "${hosts_names[@]/#/$hosts_prefix-}" "$hosts_prefix-br"; do
    [ -e "/run/netns/$ns" ] || continue
    for _ in $(seq 30); do [ -z "$(ip netns pids "$ns" 2>/dev/null)" ] && break; sleep 0.1; done
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true  # takes the veth pairs and the bridge with it
  done
  hosts_prefix=""
}

# Namespaces of earlier tests whose shell is gone without its cleanup (killed by SIGKILL, as ctest
# does at a TIMEOUT): named ember-mn-PID-..., so only those whose PID no longer runs are removed.
hosts_remove_stale() {
  local ns pid f
  for f in /run/netns/ember-mn-*; do
    [ -e "$f" ] || continue
    ns=${f#/run/netns/}
    pid=${ns#ember-mn-}
    pid=${pid%%-*}
    kill -0 "$pid" 2>/dev/null && continue
    for pid in $(ip netns pids "$ns" 2>/dev/null); do kill -KILL "$pid" 2>/dev/null || true; done
    ip netns delete "$ns" 2>/dev/null || true
  done
}

# The address of host number I (1-based).
hosts_addr() { echo "198.18.0.$1"; }

hosts_write_tools() {
  local dir=$1
  # on HOST CMD...: the host's network namespace, its hostname, its /etc/hosts and its /tmp.
  cat >"$dir/on" <<EOF
#!/usr/bin/env bash
host=\$1
shift
[ -d "$dir/\$host" ] || { echo "on: unknown host '\$host' (hosts: ${hosts_names[*]})" >&2; exit 255; }
exec nsenter --net=/run/netns/$hosts_prefix-\$host unshare --uts --mount --propagation private \\
  sh -c 'hostname "\$0" && mount --bind "$dir/hosts" /etc/hosts && mount --bind "$dir/\$0/tmp" /tmp && exec "\$@"' \\
  "\$host" "\$@"
EOF
  # rsh HOST COMMAND...: what OpenMPI's rsh launcher calls; like ssh, the words are one command for
  # the remote shell (OpenMPI's daemon command sets variables and quotes its arguments).
  cat >"$dir/rsh" <<EOF
#!/usr/bin/env bash
host=\$1
shift
exec "$dir/on" "\$host" sh -c "\$*"
EOF
  chmod +x "$dir/on" "$dir/rsh"
}

hosts_up() {
  local dir=$1
  shift
  hosts_names=("$@")
  for tool in ip unshare; do command -v "$tool" >/dev/null || hosts_skip "$tool is not installed (iproute2, util-linux)"; done
  [ "$(id -u)" -eq 0 ] || hosts_skip "network namespaces need root"
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd -P)
  case $dir/ in /tmp/*)
    echo "FAIL: hosts_up: '$dir' is under /tmp, which each host replaces with its own (use a folder elsewhere)"
    exit 1
    ;;
  esac
  hosts_remove_stale
  hosts_prefix="ember-mn-$$-$RANDOM"
  trap hosts_down EXIT
  ip netns add "$hosts_prefix-br" 2>/dev/null || hosts_skip "cannot create a network namespace (ip netns add)"
  # Without STP (the default) a bridge forwards as soon as a port is up: no waiting.
  ip -n "$hosts_prefix-br" link add br0 type bridge
  ip -n "$hosts_prefix-br" link set br0 up
  : >"$dir/hosts"
  echo "127.0.0.1 localhost" >>"$dir/hosts"
  local i=0 h ns
  for h in "${hosts_names[@]}"; do
    i=$((i + 1))
    ns="$hosts_prefix-$h"
    ip netns add "$ns"
    # Both ends are created inside the namespaces: the machine's own namespace never sees them.
    ip -n "$ns" link add eth0 type veth peer name "v$i" netns "$hosts_prefix-br"
    ip -n "$hosts_prefix-br" link set "v$i" master br0 up
    ip -n "$ns" addr add "$(hosts_addr $i)/15" dev eth0
    ip -n "$ns" link set eth0 up
    ip -n "$ns" link set lo up
    mkdir -p "$dir/$h/tmp"
    echo "$(hosts_addr $i) $h" >>"$dir/hosts"
  done
  hosts_write_tools "$dir"
  export HOSTS_DIR=$dir
  # OpenMPI: start remote daemons through the namespaces, and keep its traffic (its out-of-band
  # channel and the TCP transport) on the hosts' network, 198.18.0.0/15.
  export OMPI_MCA_plm_rsh_agent=$dir/rsh
  export OMPI_MCA_oob_tcp_if_include=198.18.0.0/15 OMPI_MCA_btl_tcp_if_include=198.18.0.0/15
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
}

on() { "$HOSTS_DIR/on" "$@"; }

# The PIDs of the processes running on HOST whose command name (/proc/PID/comm) is NAME.
hosts_pids() {
  local pid
  for pid in $(ip netns pids "$hosts_prefix-$1" 2>/dev/null); do
    [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = "$2" ] && echo "$pid"
  done
  return 0
}
