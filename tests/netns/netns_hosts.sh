#!/usr/bin/env bash
# netns_hosts.sh - runs one job's CPU ranks on HOSTS "hosts" made of network namespaces.
#
#   netns_hosts.sh HOSTS RANKS_PER_HOST MSCCLPP_RUN [--kill=RANK | --cut=HOST] -- PROGRAM [ARGS...]
#
# Makes a switch (a namespace holding a bridge) and HOSTS host namespaces, each linked to the
# switch by a veth pair (eth0 in the host, 10.200.0.<h+1>/24; no route out, so traffic stays
# between them), then on each host runs `mscclpp-run -n RANKS_PER_HOST --nnodes HOSTS
# --node-rank h` with the root on host 0's address. Every name is unique to this run (the pid and
# a random suffix), veths are made inside the namespaces (no name in the root namespace), and an
# EXIT trap kills what it started and deletes the namespaces, so parallel runs do not collide.
#
# Failure injection: the ranks get NETNS_DIR (a private directory); the victim rank writes its pid
# to $NETNS_DIR/victim.pid when it is ready. Then --kill=RANK sends it SIGKILL, --cut=HOST sets the
# switch's end of HOST's link down; the time that returned (CLOCK_BOOTTIME seconds, /proc/uptime)
# goes to $NETNS_DIR/event. With --kill the victim's host may exit 137 (the killed rank).
#
# GPU ranks: NETNS_GPUS_PER_HOST=G gives host h CUDA_VISIBLE_DEVICES=h*G..h*G+G-1 (each host's
# mscclpp-run numbers its local ranks from 0, and a GPU rank takes GPU local_rank % visible GPUs).
#
# Exit status: 0 when every host's launcher succeeded; 77 (skipped, with a line saying why) when
# namespaces cannot be made here (not root, no `ip`, no namespace support); else the worst status.
set -u

usage() { echo "usage: $0 HOSTS RANKS_PER_HOST MSCCLPP_RUN [--kill=RANK | --cut=HOST] -- PROGRAM [ARGS...]" >&2; exit 2; }
[ $# -ge 5 ] || usage
HOSTS=$1 RPH=$2 RUN=$3
shift 3
KILL=-1 CUT=-1
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --kill=*) KILL=${1#--kill=}; shift ;;
    --cut=*) CUT=${1#--cut=}; shift ;;
    *) usage ;;
  esac
done
[ "${1:-}" = "--" ] || usage
shift
[ $# -ge 1 ] || usage

skip() { echo "netns_hosts: SKIP: $*"; exit 77; }
[ "$EUID" = 0 ] || skip "needs root to make network namespaces"
command -v ip > /dev/null || skip "no 'ip' command (iproute2)"

TAG="mpp$$r$RANDOM"
SWITCH="${TAG}sw"
NETNS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/netns_hosts.XXXXXX") || exit 1
export NETNS_DIR
PIDS=()
MADE=()

cleanup() {
  for p in "${PIDS[@]}"; do kill -KILL "$p" 2> /dev/null; done
  for p in "${PIDS[@]}"; do wait "$p" 2> /dev/null; done
  for ns in "${MADE[@]}"; do ip netns delete "$ns" 2> /dev/null; done
  rm -rf "$NETNS_DIR"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkns() {
  ip netns add "$1" 2> "$NETNS_DIR/err" || return 1
  MADE+=("$1")
  ip -n "$1" link set lo up
}

mkns "$SWITCH" || skip "cannot make a network namespace: $(cat "$NETNS_DIR/err")"
ip netns exec "$SWITCH" true 2> "$NETNS_DIR/err" || skip "cannot run a process in a namespace: $(cat "$NETNS_DIR/err")"
ip -n "$SWITCH" link add br0 type bridge && ip -n "$SWITCH" link set br0 up || skip "cannot make a bridge"
for ((h = 0; h < HOSTS; h++)); do
  ns="${TAG}h$h"
  mkns "$ns" || { echo "netns_hosts: cannot make namespace $ns: $(cat "$NETNS_DIR/err")" >&2; exit 1; }
  ip -n "$SWITCH" link add "v$h" type veth peer name eth0 netns "$ns" 2> "$NETNS_DIR/err" ||
    skip "cannot make a veth pair: $(cat "$NETNS_DIR/err")"
  ip -n "$SWITCH" link set "v$h" master br0 up &&
    ip -n "$ns" addr add "10.200.0.$((h + 1))/24" dev eth0 &&
    ip -n "$ns" link set eth0 up || { echo "netns_hosts: cannot set up host $h's link" >&2; exit 1; }
done

LIMIT_S=${NETNS_LIMIT_S:-40} # each host's launcher is killed after this; below ctest's TIMEOUT, so the trap runs
SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
for ((h = 0; h < HOSTS; h++)); do
  gpus=() # NETNS_GPUS_PER_HOST=G: host h sees GPUs h*G .. h*G+G-1 (one machine's GPUs split among its "hosts")
  if [ -n "${NETNS_GPUS_PER_HOST:-}" ]; then
    gpus=("CUDA_VISIBLE_DEVICES=$(seq -s, $((h * NETNS_GPUS_PER_HOST)) $((h * NETNS_GPUS_PER_HOST + NETNS_GPUS_PER_HOST - 1)))")
  fi
  timeout -k 2 "$LIMIT_S" ip netns exec "${TAG}h$h" env "${gpus[@]}" MSCCLPP_BOOTSTRAP_SECRET="$SECRET" "$RUN" -n "$RPH" --nnodes "$HOSTS" \
    --node-rank "$h" --host 10.200.0.1 --port 29500 --grace 5 -- "$@" &
  PIDS+=($!)
done

# Waits (bounded) for the victim to be ready, then kills it or cuts its host's link.
inject() {
  for ((i = 0; i < 400; i++)); do
    [ -s "$NETNS_DIR/victim.pid" ] && break
    sleep 0.05
  done
  [ -s "$NETNS_DIR/victim.pid" ] || { echo "netns_hosts: the victim never got ready" >&2; return 1; }
  local before after
  before=$(cut -d' ' -f1 /proc/uptime)
  if [ "$KILL" -ge 0 ]; then
    echo "netns_hosts: killing rank $KILL (pid $(cat "$NETNS_DIR/victim.pid"))"
    kill -KILL "$(cat "$NETNS_DIR/victim.pid")"
  else
    echo "netns_hosts: cutting host $CUT's link"
    ip -n "$SWITCH" link set "v$CUT" down
  fi
  # The time the action returned: it took effect just before (a link change may first wait a
  # while for the kernel's network lock, when other namespaces are being made or deleted).
  after=$(cut -d' ' -f1 /proc/uptime)
  echo "$after" > "$NETNS_DIR/event.tmp" && mv "$NETNS_DIR/event.tmp" "$NETNS_DIR/event"
  echo "netns_hosts: done at $after s (asked at $before s)"
}
status=0
if [ "$KILL" -ge 0 ] || [ "$CUT" -ge 0 ]; then inject || status=1; fi

victim_host=-1
[ "$KILL" -ge 0 ] && victim_host=$((KILL / RPH))
skipped=0
for ((h = 0; h < HOSTS; h++)); do
  wait "${PIDS[$h]}"
  rc=$?
  [ "$h" = "$victim_host" ] && [ "$rc" = 137 ] && rc=0 # the rank we killed
  [ "$rc" = 77 ] && skipped=$((skipped + 1)) && continue
  [ "$rc" -gt "$status" ] && status=$rc
  [ "$rc" != 0 ] && echo "netns_hosts: host $h's ranks failed (status $rc)" >&2
done
PIDS=()
[ "$skipped" = "$HOSTS" ] && exit 77
[ "$skipped" != 0 ] && [ "$status" = 0 ] && { echo "netns_hosts: some hosts skipped, others did not" >&2; status=1; }
exit "$status"
