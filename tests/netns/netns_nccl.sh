#!/usr/bin/env bash
# netns_nccl.sh - an NCCL program (tests/nccl/nccl_hosts.c) on hosts made of network namespaces,
# and what the library's log says about it.
#
#   netns_nccl.sh HOSTS RANKS_PER_HOST MSCCLPP_RUN [--kill=RANK] [--hier] [--across=TRANSPORT]
#                 -- PROGRAM [ARGS...]
#
# Runs netns_hosts.sh (beside this file) with the library's INFO lines of init and TRACE lines of
# algo (MSCCLPP_LOG_LEVEL=trace, MSCCLPP_LOG_SUBSYS=init,algo), then checks its output:
#   - the library saw HOSTS hosts: each rank's "host identity" line gives a host hash; the ranks
#     of one host share one, different hosts' differ (HOSTS distinct hashes, RANKS_PER_HOST each);
#   - --hier: every allreduce, allgather, reducescatter and broadcast the library dispatched ran
#     on HOSTS hosts through its hierarchical CPU algorithm (cpu_<collective>_hier), and there
#     was at least one of each; except allreduce calls of at most 8 KiB, which the selection
#     table (tuning/algo.tsv) gives the one-step all-pairs algorithm (cpu_allreduce_allpairs);
#   - --across=TRANSPORT: every pipe of the collectives between ranks of different hosts (INFO
#     "pipe to rank P over T") is over TRANSPORT (tcp, or net with MSCCLPP_NET_TRANSPORT=on), and
#     there is at least one; those inside a host are over shm.
# Exit status: netns_hosts.sh's when it failed or skipped (77), else 1 when a check fails.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
[ $# -ge 5 ] || { echo "usage: $0 HOSTS RANKS_PER_HOST MSCCLPP_RUN [--kill=RANK] [--hier] [--across=TRANSPORT] -- PROGRAM [ARGS...]" >&2; exit 2; }
HOSTS=$1 RPH=$2 RUN=$3
shift 3
INJECT=() HIER=0 ACROSS=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
  case $1 in
    --kill=*) INJECT+=("$1"); shift ;;
    --hier) HIER=1; shift ;;
    --across=*) ACROSS=${1#--across=}; shift ;;
    *) echo "netns_nccl: unknown option $1" >&2; exit 2 ;;
  esac
done

LOG=$(mktemp "${TMPDIR:-/tmp}/netns_nccl.XXXXXX") || exit 1
trap 'rm -f "$LOG"' EXIT
MSCCLPP_LOG_LEVEL=trace MSCCLPP_LOG_SUBSYS=init,algo "$HERE/netns_hosts.sh" "$HOSTS" "$RPH" "$RUN" "${INJECT[@]}" "$@" \
  > "$LOG" 2>&1
status=$?
# the run's own lines (the programs' and the harness's), not the library's log
grep -v "^\S*:[0-9]*:[0-9]* \[[-0-9]*\] \(TRACE\|INFO\|DEBUG\) " "$LOG" | tail -n 60
if [ "$status" != 0 ]; then
  [ "$status" = 77 ] || { echo "---- the log's last lines ----"; tail -n 40 "$LOG"; }
  exit "$status"
fi

fail() { echo "netns_nccl: FAIL: $*"; exit 1; }

# HOSTS distinct host hashes, RANKS_PER_HOST ranks with each
counts=$(grep -o "host identity: .*-> host hash [0-9a-f]*" "$LOG" | awk '{print $NF}' | sort | uniq -c | awk '{print $1}' | sort -u)
nhash=$(grep -o "host identity: .*-> host hash [0-9a-f]*" "$LOG" | awk '{print $NF}' | sort -u | wc -l)
[ "$nhash" = "$HOSTS" ] && [ "$counts" = "$RPH" ] ||
  fail "the library saw $nhash host hash(es) (ranks per hash: $(echo $counts)), expected $HOSTS of $RPH ranks each"
echo "netns_nccl: the library saw $HOSTS hosts of $RPH ranks"

if [ "$HIER" = 1 ]; then
  for coll in allreduce allgather reducescatter broadcast; do
    lines=$(grep -o " $coll of [0-9]* bytes on [0-9]* ranks of [0-9]* hosts: [a-z_0-9]*" "$LOG")
    [ -n "$lines" ] || fail "no $coll dispatched (no TRACE line of the algo subsystem)"
    other=$(echo "$lines" | grep -v " of $HOSTS hosts: cpu_${coll}_hier$" |
      awk -v c="$coll" '!(c == "allreduce" && $3 <= 8192 && $NF == "cpu_allreduce_allpairs")' | sort | uniq -c | head -n 5)
    [ -z "$other" ] || fail "$coll not on $HOSTS hosts through cpu_${coll}_hier: $other"
    nh=$(echo "$lines" | grep -c "hosts: cpu_${coll}_hier$")
    [ "$nh" -gt 0 ] || fail "no $coll through cpu_${coll}_hier"
    echo "netns_nccl: $(echo "$lines" | wc -l) ${coll}s on $HOSTS hosts, $nh through cpu_${coll}_hier$([ "$coll" = allreduce ] && echo " (the others of at most 8 KiB all-pairs)")"
  done
fi
if [ -n "$ACROSS" ]; then
  # "[r] INFO algo collectives: pipe to rank p over t": rank r's pipe to p; hosts are r / RANKS_PER_HOST
  bad=$(sed -n 's/.* \[\([0-9]*\)\] INFO algo collectives: pipe to rank \([0-9]*\) over \([a-z_]*\).*/\1 \2 \3/p' "$LOG" |
    awk -v rph="$RPH" -v across="$ACROSS" '{ want = int($1 / rph) == int($2 / rph) ? "shm" : across; n[want]++
           if ($3 != want) print "rank " $1 " -> " $2 " over " $3 " (expected " want ")" }
         END { if (!n[across]) print "no pipe between hosts" }')
  [ -z "$bad" ] || fail "pipes: $(echo "$bad" | head -n 5)"
  echo "netns_nccl: the collectives' pipes between hosts are over $ACROSS, inside a host over shm"
fi
exit 0
