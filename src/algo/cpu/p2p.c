/* p2p.c - a group's sends and receives on CPU ranks. Nothing blocks: the loop offers every op that
 * may move (the first unfinished one of its communicator, peer and direction, so that the k-th
 * send to a peer meets the peer's k-th receive) whatever the pipes allow, until all are done. The
 * order of the calls in a group, and the order in which peers reach it, therefore never deadlocks.
 * A send to this rank itself is matched with this rank's receive from itself, in call order. A send
 * is done once its receiver has acknowledged all of it. A wait with no progress at all for
 * MSCCLPP_SEMAPHORE_TIMEOUT ms, or a peer found gone before it did its part, is an error that
 * names the op and the peer. */
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "algo/cpu/net.h"
#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/param.h"
#include "util/timeutil.h"

static struct chunk_hdr p2p_hdr(uint64_t total, uint64_t offset, size_t bytes) {
  struct chunk_hdr h = {.magic = CHUNK_MAGIC, .coll = ALGO_COLL_SENDRECV, .root = -1, .bytes = (uint32_t)bytes,
                        .total = total, .offset = offset};
  return h;
}

/* Matches sends to self with receives from self, per communicator in call order, and copies. */
static mscclppResult_t run_self(struct p2p_op* ops, int nops) {
  for (int i = 0; i < nops; i++) {
    struct p2p_op* s = &ops[i];
    if (!s->is_send || s->finished || s->peer != s->ac->rank) continue;
    struct p2p_op* r = NULL;
    for (int j = 0; j < nops && r == NULL; j++)
      if (!ops[j].is_send && !ops[j].finished && ops[j].ac == s->ac && ops[j].peer == s->ac->rank) r = &ops[j];
    if (r == NULL)
      return MPP_ERR(mscclppInvalidUsage, "group: rank %d sends %zu bytes to itself without a matching receive from itself",
                     s->ac->rank, s->bytes);
    if (r->bytes != s->bytes)
      return MPP_ERR(mscclppInvalidUsage, "group: rank %d sends %zu bytes to itself but its receive from itself takes %zu",
                     s->ac->rank, s->bytes, r->bytes);
    memmove(r->buf, s->buf, s->bytes);
    s->done = r->done = s->bytes;
    s->finished = r->finished = 1;
  }
  for (int i = 0; i < nops; i++)
    if (!ops[i].finished && ops[i].peer == ops[i].ac->rank)
      return MPP_ERR(mscclppInvalidUsage, "group: rank %d receives %zu bytes from itself without a matching send to itself",
                     ops[i].ac->rank, ops[i].bytes);
  return mscclppSuccess;
}

/* Connects the pipes the group needs (per communicator in increasing peer order) and links every op
 * to its predecessor in the same direction with the same peer. */
static mscclppResult_t prepare(struct p2p_op* ops, int nops) {
  for (int i = 0; i < nops; i++) { /* the first op of each communicator prepares it */
    struct algo_comm* ac = ops[i].ac;
    int first = 1;
    for (int j = 0; j < i && first; j++) first = ops[j].ac != ac;
    if (!first) continue;
    struct cpu_net* net;
    MPP_CHECK(cpu_net_get(ac, &net));
    MPP_CHECK(cpu_net_usable(net, ops[i].is_send ? "mscclppSend" : "mscclppRecv"));
    net->coll = ALGO_COLL_SENDRECV;
    memset(net->want, 0, (size_t)ac->nranks);
    memset(net->last_op[0], 0xff, (size_t)ac->nranks * sizeof(int)); /* -1 */
    memset(net->last_op[1], 0xff, (size_t)ac->nranks * sizeof(int));
    for (int j = i; j < nops; j++)
      if (ops[j].ac == ac && !ops[j].finished) net->want[ops[j].peer] = 1;
    for (int r = 0; r < ac->nranks; r++)
      if (net->want[r] && r != ac->rank) MPP_CHECK(cpu_connect(net, r));
  }
  for (int i = 0; i < nops; i++) {
    int* last = &ops[i].ac->net->last_op[ops[i].is_send][ops[i].peer];
    ops[i].pred = *last;
    *last = i;
  }
  return mscclppSuccess;
}

/* Takes the acknowledgements that arrived on p; *moved = 1 when one did. */
static mscclppResult_t take_acks(struct cpu_net* net, struct cpu_pipe* p, int* moved) {
  while (p->acked < p->sent) {
    int ok;
    MPP_CHECK(cpu_net_break(net, mscclppHostSemaphorePoll(p->ack, &ok)));
    if (!ok) break;
    p->acked++;
    *moved = 1;
  }
  return mscclppSuccess;
}

/* Moves what op can move now; *moved = 1 when something went. A send is finished only once its
 * receiver has acknowledged every chunk of it (the pipe's later chunks wait for it: pred), so a
 * rank leaves a group only when what it sent has been taken: it may then destroy its
 * communicator at once without failing a receiver that had not yet read its last chunk (over tcp
 * the peer's close can be seen before that chunk is polled). */
static mscclppResult_t step_op(struct p2p_op* op, int* moved) {
  struct cpu_net* net = op->ac->net;
  struct cpu_pipe* p = &net->pipes[op->peer];
  while (op->done < op->bytes) {
    size_t n = min_size(net->chunk, op->bytes - op->done);
    struct chunk_hdr h = p2p_hdr(op->bytes, op->done, n);
    if (op->is_send) {
      int ok;
      MPP_CHECK(cpu_send_ready(net, p, &ok));
      if (!ok) break;
      MPP_CHECK(cpu_send(net, p, &h, op->buf + op->done));
    } else {
      const struct chunk_hdr* got;
      MPP_CHECK(cpu_recv_poll(net, p, &h, &got));
      if (got == NULL) break;
      memcpy(op->buf + op->done, chunk_data(got), n);
      MPP_CHECK(cpu_recv_done(net, p));
    }
    op->done += n;
    *moved = 1;
  }
  if (op->is_send && op->done == op->bytes) MPP_CHECK(take_acks(net, p, moved));
  op->finished = op->done == op->bytes && (!op->is_send || p->acked == p->sent);
  return mscclppSuccess;
}

/* Whether op, whose peer is gone, may still finish with what the peer did before it went: a
 * receive (its chunks), or a send with every byte out (its acknowledgements). The transport marks
 * a connection closed only after handling everything that came before the close, and shm
 * stores are visible at once, so one more step takes all there is. */
static int finishes_anyway(struct p2p_op* ops, int i) {
  struct p2p_op* op = &ops[i];
  if ((op->pred >= 0 && !ops[op->pred].finished) || (op->is_send && op->done < op->bytes)) return 0;
  int moved = 0;
  return step_op(op, &moved) == mscclppSuccess && op->finished;
}

/* Fails when a peer of an unfinished op is known to be gone (and the op cannot finish without it). */
static mscclppResult_t check_peers(struct p2p_op* ops, int nops) {
  for (int i = 0; i < nops; i++) {
    if (ops[i].finished) continue;
    struct cpu_pipe* p = &ops[i].ac->net->pipes[ops[i].peer];
    mscclppResult_t res = connection_peer_alive(p->conn);
    if (res != mscclppSuccess) {
      char inner[512];
      snprintf(inner, sizeof(inner), "%s", err_last());
      if (finishes_anyway(ops, i)) continue; /* the peer left after its part */
      return MPP_ERR(res, "group: rank %d's %s rank %d cannot finish (%zu of %zu bytes moved): %s", ops[i].ac->rank,
                     ops[i].is_send ? "send to" : "receive from", ops[i].peer, ops[i].done, ops[i].bytes, inner);
    }
  }
  return mscclppSuccess;
}

static mscclppResult_t stuck(const struct p2p_op* ops, int nops, int64_t ms) {
  for (int i = 0; i < nops; i++)
    if (!ops[i].finished)
      return MPP_ERR(mscclppTimeout, "group: no progress for %lld ms: rank %d's %s rank %d has moved %zu of %zu bytes",
                     (long long)ms, ops[i].ac->rank, ops[i].is_send ? "send to" : "receive from", ops[i].peer,
                     ops[i].done, ops[i].bytes);
  return mscclppSuccess;
}

/* Yields briefly after a few idle rounds, then sleeps in short steps (ranks may share cores). */
static void backoff(unsigned idle) {
  if (idle < 64) return;
  if (idle < 2048) sched_yield();
  else usleep(20);
}

static mscclppResult_t progress(struct p2p_op* ops, int nops) {
  int64_t timeout_ms = param_int(PARAM_SEMAPHORE_TIMEOUT);
  uint64_t last = time_now_ns(), next_check = last + 20000000ull;
  unsigned idle = 0;
  for (;;) {
    int moved = 0, left = 0;
    for (int i = 0; i < nops; i++) {
      if (ops[i].finished) continue;
      if (ops[i].pred < 0 || ops[i].finished || ops[ops[i].pred].finished) MPP_CHECK(step_op(&ops[i], &moved));
      left += !ops[i].finished;
    }
    if (left == 0) return mscclppSuccess;
    if (moved) {
      idle = 0;
      last = time_now_ns();
      continue;
    }
    uint64_t now = time_now_ns();
    if (now - last > (uint64_t)timeout_ms * 1000000ull) return stuck(ops, nops, timeout_ms);
    if (now >= next_check) {
      next_check = now + 20000000ull;
      MPP_CHECK(check_peers(ops, nops));
    }
    backoff(idle++);
  }
}

mscclppResult_t cpu_p2p_run(struct p2p_op* ops, int nops) {
  MPP_CHECK(run_self(ops, nops));
  MPP_CHECK(prepare(ops, nops));
  return progress(ops, nops);
}
