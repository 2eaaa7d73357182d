/* xfer.c - sending and receiving chunks through a pipe (see net.h for the slot protocol). */
#include <stdio.h>
#include <string.h>

#include "algo/cpu/net.h"
#include "core/connection.h"
#include "util/err.h"

struct chunk_hdr cpu_hdr(const struct algo_args* a, uint64_t offset, size_t bytes) {
  struct chunk_hdr h = {.magic = CHUNK_MAGIC, .coll = (uint16_t)a->coll, .dtype = (uint8_t)a->dtype, .op = (uint8_t)a->op,
                        .root = a->root, .bytes = (uint32_t)bytes, .total = (uint64_t)a->count * a->es,
                        .offset = offset, .scalar = a->scalar};
  return h;
}

/* Waits for the next signal on s from p's peer; a failure names both ranks, the collective and the
 * chunk awaited, and keeps the semaphore's own message. */
static mscclppResult_t wait_sem(struct cpu_net* net, struct cpu_pipe* p, mscclppHostSemaphore_t s, const char* what,
                                uint64_t seq) {
  mscclppResult_t res = mscclppHostSemaphoreWait(s, -1);
  if (res == mscclppSuccess) return res;
  char inner[512];
  snprintf(inner, sizeof(inner), "%s", err_last());
  return cpu_net_break(net, MPP_ERR(res, "%s: rank %d waited for rank %d to %s chunk %llu of their pipe: %s",
                 algo_coll_name((enum algo_coll)net->coll), net->ac->rank, p->peer, what, (unsigned long long)seq, inner));
}

static inline size_t slot_index(uint64_t seq) { return (size_t)(seq % CPU_NSLOTS); }

mscclppResult_t cpu_send_ready(struct cpu_net* net, struct cpu_pipe* p, int* ok) {
  if (p->sent - p->acked < CPU_NSLOTS) {
    *ok = 1;
    return mscclppSuccess;
  }
  MPP_CHECK(cpu_net_break(net, mscclppHostSemaphorePoll(p->ack, ok)));
  if (*ok) p->acked++;
  return mscclppSuccess;
}

mscclppResult_t cpu_send_begin(struct cpu_net* net, struct cpu_pipe* p, void** data) {
  while (p->sent - p->acked >= CPU_NSLOTS) {
    MPP_CHECK(wait_sem(net, p, p->ack, "acknowledge", p->acked));
    p->acked++;
  }
  char* slot = p->remote_inbox ? p->remote_inbox + slot_index(p->sent) * net->slot : net->staging;
  *data = slot + CPU_HDR_BYTES;
  return mscclppSuccess;
}

mscclppResult_t cpu_send_commit(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* h) {
  struct chunk_hdr hdr = *h;
  hdr.seq = p->sent;
  uint64_t at = p->remote_off + slot_index(p->sent) * net->slot;
  if (p->remote_inbox) {
    memcpy(p->remote_inbox + slot_index(p->sent) * net->slot, &hdr, sizeof(hdr));
  } else {
    memcpy(net->staging, &hdr, sizeof(hdr));
    uint64_t staging_off = (uint64_t)(net->staging - net->scratch);
    MPP_CHECK(cpu_net_break(net, mscclppConnectionWrite(p->conn, p->remote, at, net->reg, staging_off,
                                                        CPU_HDR_BYTES + (uint64_t)hdr.bytes)));
  }
  /* The signal orders the header and data before it (shm: a release store after this thread's
   * copies; tcp: the update follows the write on the same stream). */
  MPP_CHECK(cpu_net_break(net, mscclppHostSemaphoreSignal(p->data)));
  p->sent++;
  return mscclppSuccess;
}

/* tcp, chunks of CPU_STREAM_SRC_MIN bytes or more: the chunk's data goes from src itself into the
 * peer's slot, then its header, then the signal, all in order on the connection's one stream (tcp
 * sends before its write returns), so no copy into the staging slot. Smaller chunks keep the one
 * write of header and data together (one message less). On 2 CPU ranks of 2 stand-in hosts of a
 * 64-core machine (16 MiB, two rounds): allreduce 15.8 / 13.7 -> 11.1 / 13.4 ms, reducescatter
 * 14.7 / 13.8 -> 11.7 / 12.1, allgather 5.5 / 5.6 -> 4.7 / 6.6 (docs/measurements.md). */
#define CPU_STREAM_SRC_MIN (256u << 10)
static mscclppResult_t send_from_source(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* h,
                                        const void* src) {
  while (p->sent - p->acked >= CPU_NSLOTS) {
    MPP_CHECK(wait_sem(net, p, p->ack, "acknowledge", p->acked));
    p->acked++;
  }
  struct chunk_hdr hdr = *h;
  hdr.seq = p->sent;
  uint64_t at = p->remote_off + slot_index(p->sent) * net->slot;
  MPP_CHECK(cpu_net_break(net, connection_write_host(p->conn, p->remote, at + CPU_HDR_BYTES, src, hdr.bytes)));
  MPP_CHECK(cpu_net_break(net, connection_write_host(p->conn, p->remote, at, &hdr, sizeof(hdr))));
  MPP_CHECK(cpu_net_break(net, mscclppHostSemaphoreSignal(p->data)));
  p->sent++;
  return mscclppSuccess;
}

mscclppResult_t cpu_send(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* h, const void* src) {
  if (p->stream_src && h->bytes >= CPU_STREAM_SRC_MIN) return send_from_source(net, p, h, src);
  void* data;
  MPP_CHECK(cpu_send_begin(net, p, &data));
  memcpy(data, src, h->bytes);
  return cpu_send_commit(net, p, h);
}

/* Names the first field of got that differs from want. */
static mscclppResult_t mismatch(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* want,
                                const struct chunk_hdr* got) {
  const char* coll = algo_coll_name((enum algo_coll)want->coll);
  int me = net->ac->rank;
  if (got->magic != CHUNK_MAGIC || got->seq != p->recvd)
    return MPP_ERR(mscclppInternalError, "%s: rank %d found a corrupt chunk from rank %d (magic 0x%x, seq %llu, expected %llu)",
                   coll, me, p->peer, got->magic, (unsigned long long)got->seq, (unsigned long long)p->recvd);
  if (got->coll != want->coll)
    return MPP_ERR(mscclppInvalidUsage, "%s: rank %d runs %s while rank %d runs %s: every rank must call the same collectives in the same order",
                   coll, me, coll, p->peer, algo_coll_name((enum algo_coll)got->coll));
  if (got->total != want->total)
    return MPP_ERR(mscclppInvalidUsage, "%s: rank %d moves %llu bytes, rank %d %llu bytes: count or datatype differ", coll, me,
                   (unsigned long long)want->total, p->peer, (unsigned long long)got->total);
  if (got->dtype != want->dtype)
    return MPP_ERR(mscclppInvalidUsage, "%s: rank %d uses datatype %s, rank %d %s", coll, me, elem_dtype_name(want->dtype),
                   p->peer, elem_dtype_name(got->dtype));
  if (got->op != want->op)
    return MPP_ERR(mscclppInvalidUsage, "%s: rank %d reduces with %s, rank %d with %s", coll, me,
                   elem_op_name((enum elem_op)want->op), p->peer, elem_op_name((enum elem_op)got->op));
  if (got->root != want->root)
    return MPP_ERR(mscclppInvalidUsage, "%s: rank %d has root %d, rank %d root %d", coll, me, want->root, p->peer, got->root);
  return MPP_ERR(mscclppInternalError, "%s: rank %d expected chunk %llu from rank %d at offset %llu with %u bytes, got offset %llu with %u",
                 coll, me, (unsigned long long)p->recvd, p->peer, (unsigned long long)want->offset, want->bytes,
                 (unsigned long long)got->offset, got->bytes);
}

static mscclppResult_t check_chunk(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* want,
                                   const struct chunk_hdr** out) {
  const struct chunk_hdr* got = (const struct chunk_hdr*)(p->inbox + slot_index(p->recvd) * net->slot);
  if (got->magic != CHUNK_MAGIC || got->seq != p->recvd || got->coll != want->coll || got->total != want->total ||
      got->dtype != want->dtype || got->op != want->op || got->root != want->root || got->bytes != want->bytes ||
      got->offset != want->offset)
    return cpu_net_break(net, mismatch(net, p, want, got));
  *out = got;
  return mscclppSuccess;
}

mscclppResult_t cpu_recv(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* want, const struct chunk_hdr** h) {
  MPP_CHECK(wait_sem(net, p, p->data, "send", p->recvd));
  return check_chunk(net, p, want, h);
}

mscclppResult_t cpu_recv_poll(struct cpu_net* net, struct cpu_pipe* p, const struct chunk_hdr* want,
                              const struct chunk_hdr** h) {
  int ready = 0;
  *h = NULL;
  MPP_CHECK(cpu_net_break(net, mscclppHostSemaphorePoll(p->data, &ready)));
  return ready ? check_chunk(net, p, want, h) : mscclppSuccess;
}

mscclppResult_t cpu_recv_done(struct cpu_net* net, struct cpu_pipe* p) {
  p->recvd++;
  return cpu_net_break(net, mscclppHostSemaphoreSignal(p->ack));
}

mscclppResult_t cpu_recv_copy(struct cpu_net* net, const struct algo_args* a, int q, size_t elem_off, size_t cnt) {
  struct chunk_hdr want = cpu_hdr(a, elem_off * a->es, cnt * a->es);
  const struct chunk_hdr* h;
  MPP_CHECK(cpu_recv(net, &net->pipes[q], &want, &h));
  memcpy((char*)a->recv + elem_off * a->es, chunk_data(h), cnt * a->es);
  return cpu_recv_done(net, &net->pipes[q]);
}
