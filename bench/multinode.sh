#!/usr/bin/env bash
# bench/multinode.sh [BUILD_DIR [STEPS ROUNDS]]: data-parallel training across two "hosts" on this
# machine (network namespaces joined by a bridge: tests/multinode/hosts.sh; as root) against the
# same ranks on one host. Prints:
#   1. the bridge's TCP bandwidth, nodeA to nodeB, against loopback inside nodeA (the reference:
#      the same sender and receiver without the veth pairs and the bridge); ROUNDS transfers of
#      512 MiB each, median and range;
#   2. bench/ddp (MnistCnn and the LSTM LM: 1-rank reference, 2 ranks with overlap on and off,
#      speed-weighted, no all-reduce) three times: 2 ranks on one host (all_reduce through Ember's
#      shared memory), on one host with EMBER_MPI_SHM_SLOT_BYTES=0 (OpenMPI's shared memory), and
#      one rank per host (OpenMPI over TCP through the bridge).
# One math thread per rank. Both "hosts" share this machine's cores, so this measures the
# transport (TCP through veth and a bridge, i.e. the kernel's network stack, not a wire) and not a
# second machine's compute.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=$(cd "${1:-$here/../build}" && pwd)
steps=${2:-20} rounds=${3:-5}
. "$here/../tests/multinode/hosts.sh"
work=$PWD/bench-multinode-$$
hosts_up "$work/hosts" nodeA nodeB
trap 'hosts_down; rm -rf "$work"' EXIT
export OMP_NUM_THREADS=1 OMP_WAIT_POLICY=PASSIVE

echo "bench/multinode.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$here" rev-parse --short HEAD 2>/dev/null)"
echo "CPU: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(getconf _NPROCESSORS_ONLN) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"

# A receiver that counts bytes until the sender closes, and a sender of MiB megabytes; the sender
# prints the seconds from its first byte to the receiver's acknowledgement of the last.
cat >"$work/tcp.py" <<'EOF'
import socket, sys, time
role, addr, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if role == "recv":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((addr, port)); s.listen(1)
    print("ready", flush=True)
    while True:
        c, _ = s.accept()
        n = 0
        while True:
            b = c.recv(1 << 20)
            if not b: break
            n += len(b)
        c.sendall(str(n).encode()); c.close()
else:
    mib = int(sys.argv[4]); buf = b"\0" * (4 << 20)
    c = socket.create_connection((addr, port)); t = time.perf_counter()
    for _ in range(mib // 4): c.sendall(buf)
    c.shutdown(socket.SHUT_WR); got = int(c.recv(64)); dt = time.perf_counter() - t
    assert got == mib << 20, got
    print(f"{dt:.6f}")
EOF
bandwidth() {  # HOST_OF_RECEIVER ADDRESS: median, min and max GB/s over the rounds
  local port=$((20000 + RANDOM % 40000)) out=() rx
  on "$1" python3 "$work/tcp.py" recv "$2" $port >"$work/recv.out" 2>&1 &
  rx=$!
  for _ in $(seq 100); do grep -q ready "$work/recv.out" 2>/dev/null && break; sleep 0.05; done
  for _ in $(seq "$rounds"); do out+=("$(on nodeA python3 "$work/tcp.py" send "$2" $port 512)"); done
  kill $rx 2>/dev/null || true
  printf '%s\n' "${out[@]}" | sort -g | awk '{ v[NR] = 512 * 1048576 / $1 / 1e9 }
    END { printf "%.2f | %.2f–%.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2), v[NR], v[1] }'
}
echo
echo "| path (python3 sockets, 512 MiB x $rounds) | GB/s median | range |"
echo "|---|---|---|"
echo "| loopback inside nodeA (reference) | $(bandwidth nodeA 127.0.0.1) |"
echo "| nodeA → nodeB through veth + bridge | $(bandwidth nodeB "$(hosts_addr 2)") |"

ddp() {  # TITLE HOSTS [ENV...]
  local title=$1 hosts=$2
  shift 2
  echo
  echo "### bench/ddp $steps $rounds, $title"
  on nodeA env "$@" "$build/tools/ember" launch -n 2 --rank0-only --hosts "$hosts" -- "$build/bench/ddp" "$steps" "$rounds" |
    sed -n 's/^\[rank 0\] //p' | grep '^|'
}
ddp "2 ranks on one host (all_reduce through Ember's shared memory)" nodeA:2
ddp "2 ranks on one host, EMBER_MPI_SHM_SLOT_BYTES=0 (OpenMPI's shared memory)" nodeA:2 EMBER_MPI_SHM_SLOT_BYTES=0
ddp "1 rank on each of two hosts (OpenMPI TCP through the bridge)" nodeA:1,nodeB:1
