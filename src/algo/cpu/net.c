/* net.c - the CPU ranks' scratch and pipes (see net.h): made on first use, connected pairwise when
 * first needed, released with the communicator's collectives state. */
#include "algo/cpu/net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

#define HELLO_MAGIC 0x4d50414cu /* "MPAL" */

/* What two ranks swap when their pipe is made: the scratch geometry (which must agree) and the
 * registration of the scratch. ok = 0: the sender could not register or import (it says why in its
 * own log); both sides then fail. */
struct pipe_hello {
  uint32_t magic;
  uint32_t ok;
  uint64_t chunk;
  uint64_t nslots;
  uint64_t blob_len;
  unsigned char blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

/* Data bytes per slot for nranks ranks: the scratch parameter split into nranks * CPU_NSLOTS slots,
 * less the header, a multiple of 64 between 64 bytes and 1 GiB. */
static size_t chunk_bytes(int nranks) {
  int64_t total = param_int(PARAM_ALGO_CPU_SCRATCH);
  int64_t per_slot = total / ((int64_t)nranks * CPU_NSLOTS) - CPU_HDR_BYTES;
  if (per_slot > (1 << 30)) per_slot = 1 << 30;
  per_slot &= ~(int64_t)63;
  return per_slot < 64 ? 64 : (size_t)per_slot;
}

static mscclppResult_t net_alloc(struct algo_comm* ac, struct cpu_net* net) {
  int n = ac->nranks;
  net->ac = ac;
  net->chunk = chunk_bytes(n);
  net->slot = CPU_HDR_BYTES + net->chunk;
  net->region = CPU_NSLOTS * net->slot;
  net->scratch_bytes = (size_t)n * net->region;
  net->pipes = calloc((size_t)n, sizeof(*net->pipes));
  net->want = calloc((size_t)n, 1);
  net->last_op[0] = malloc((size_t)n * sizeof(int));
  net->last_op[1] = malloc((size_t)n * sizeof(int));
  net->srcs = calloc((size_t)n, sizeof(*net->srcs));
  net->scalars = calloc((size_t)n, sizeof(*net->scalars));
  if (!net->pipes || !net->want || !net->last_op[0] || !net->last_op[1] || !net->srcs || !net->scalars)
    return MPP_ERR(mscclppSystemError, "collectives: out of host memory for %d pipes", n);
  MPP_CHECK(mscclppMemAlloc((void**)&net->scratch, net->scratch_bytes, mscclppMemHost));
  MPP_CHECK(mscclppRegisterMemory(ac->comm, net->scratch, net->scratch_bytes, &net->reg));
  net->blob_len = sizeof(net->blob);
  MPP_CHECK(mscclppRegMemSerialize(net->reg, net->blob, &net->blob_len));
  net->staging = net->scratch + (size_t)ac->rank * net->region;
  for (int r = 0; r < n; r++) {
    net->pipes[r].peer = r;
    net->pipes[r].inbox = net->scratch + (size_t)r * net->region;
    net->pipes[r].remote_off = (uint64_t)ac->rank * net->region;
  }
  return mscclppSuccess;
}

mscclppResult_t cpu_net_get(struct algo_comm* ac, struct cpu_net** out) {
  if (ac->net != NULL) {
    *out = ac->net;
    return mscclppSuccess;
  }
  struct cpu_net* net = calloc(1, sizeof(*net));
  if (net == NULL) return MPP_ERR(mscclppSystemError, "collectives: out of host memory");
  mscclppResult_t res = net_alloc(ac, net);
  if (res != mscclppSuccess) {
    cpu_net_free(net);
    return res;
  }
  LOG_INFO_(LOG_SUB_ALGO, "collectives: %zu bytes of scratch, %zu-byte chunks, %d slots per peer", net->scratch_bytes,
            net->chunk, CPU_NSLOTS);
  ac->net = net;
  *out = net;
  return mscclppSuccess;
}

/* Releases what a pipe holds (the communicator is alive). Uses the core's internal release
 * functions, which keep this thread's last error (a failed connect reports its cause). */
static void pipe_release(struct cpu_pipe* p) {
  semaphore_free(p->data);
  semaphore_free(p->ack);
  if (p->conn) connection_free(p->conn, 0);
  regmem_free(p->remote);
  p->data = p->ack = NULL;
  p->conn = NULL;
  p->remote = NULL;
  p->ready = 0;
}

void cpu_net_free(struct cpu_net* net) {
  if (net == NULL) return;
  if (net->pipes != NULL)
    for (int r = 0; r < net->ac->nranks; r++) pipe_release(&net->pipes[r]);
  regmem_free(net->reg);
  if (net->scratch) mem_free(net->scratch);
  free(net->pipes);
  free(net->want);
  free(net->last_op[0]);
  free(net->last_op[1]);
  free(net->srcs);
  free(net->scalars);
  free(net);
}

/* Swaps hellos with the peer and imports its scratch. */
static mscclppResult_t exchange_scratch(struct cpu_net* net, struct cpu_pipe* p) {
  struct mscclppComm* comm = net->ac->comm;
  struct pipe_hello mine = {.magic = HELLO_MAGIC, .ok = 1, .chunk = net->chunk, .nslots = CPU_NSLOTS,
                            .blob_len = net->blob_len};
  struct pipe_hello theirs;
  memcpy(mine.blob, net->blob, net->blob_len);
  int tag = boot_tag(BOOT_TAG_ALGO, 0);
  MPP_CHECK(bootstrap_swap(comm->boot, p->peer, tag, &mine, &theirs, sizeof(mine)));
  if (theirs.magic != HELLO_MAGIC || theirs.blob_len > sizeof(theirs.blob))
    return MPP_ERR(mscclppRemoteError, "collectives: malformed scratch exchange from rank %d", p->peer);
  if (theirs.chunk != net->chunk || theirs.nslots != CPU_NSLOTS)
    return MPP_ERR(mscclppInvalidUsage,
                   "collectives: rank %d uses %llu-byte chunks, this rank %zu: every rank must set the same "
                   "MSCCLPP_ALGO_CPU_SCRATCH",
                   p->peer, (unsigned long long)theirs.chunk, net->chunk);
  mscclppResult_t res = mscclppRegMemDeserialize(comm, theirs.blob, theirs.blob_len, &p->remote);
  int32_t ok = res == mscclppSuccess, peer_ok = 0;
  MPP_CHECK(bootstrap_swap(comm->boot, p->peer, tag, &ok, &peer_ok, sizeof(ok)));
  if (res != mscclppSuccess) return res;
  if (!peer_ok)
    return MPP_ERR(mscclppRemoteError, "collectives: rank %d could not import this rank's scratch (see its log)", p->peer);
  return mscclppSuccess;
}

mscclppResult_t cpu_connect(struct cpu_net* net, int peer) {
  struct cpu_pipe* p = &net->pipes[peer];
  if (p->ready) return mscclppSuccess;
  struct mscclppComm* comm = net->ac->comm;
  mscclppTransport_t t;
  mscclppResult_t res;
  /* The pipes carry host memory. Between GPU ranks of one host Auto would pick cuda-ipc (for
   * device memory), so GPU-rank communicators (whose cross-host steps use these pipes: gpu/xhost.c)
   * ask for shm there; across hosts Auto gives net or tcp. */
  mscclppTransport_t want = mscclppTransportAuto;
  if (comm->kind == mscclppRankGpu && comm->peers[peer].host_hash == comm->peers[comm->rank].host_hash)
    want = mscclppTransportSHM;
  MPP_CHECK_GOTO(mscclppConnectionCreate(comm, peer, CPU_CONN_TAG, want, &p->conn), res, fail);
  MPP_CHECK_GOTO(exchange_scratch(net, p), res, fail);
  MPP_CHECK_GOTO(mscclppHostSemaphoreCreate(comm, p->conn, &p->data), res, fail);
  MPP_CHECK_GOTO(mscclppHostSemaphoreCreate(comm, p->conn, &p->ack), res, fail);
  MPP_CHECK_GOTO(mscclppConnectionTransport(p->conn, &t), res, fail);
  p->remote_inbox = NULL;
  p->stream_src = t == mscclppTransportTCP;
  if (t == mscclppTransportSHM) {
    void* base = NULL;
    MPP_CHECK_GOTO(mscclppRegMemInfo(p->remote, &base, NULL, NULL), res, fail);
    if (base != NULL) p->remote_inbox = (char*)base + p->remote_off;
  }
  p->sent = p->acked = p->recvd = 0;
  p->ready = 1;
  LOG_INFO_(LOG_SUB_ALGO, "collectives: pipe to rank %d over %s%s", peer, transport_name(t),
            p->remote_inbox ? " (direct writes)" : p->stream_src ? " (sent from the source)" : "");
  return mscclppSuccess;
fail:
  pipe_release(p);
  return res;
}

mscclppResult_t cpu_connect_all(struct cpu_net* net) {
  for (int r = 0; r < net->ac->nranks; r++)
    if (r != net->ac->rank) MPP_CHECK(cpu_connect(net, r));
  return mscclppSuccess;
}

mscclppResult_t cpu_net_break(struct cpu_net* net, mscclppResult_t res) {
  if (res != mscclppSuccess && net->broken == mscclppSuccess) {
    net->broken = res;
    snprintf(net->broken_msg, sizeof(net->broken_msg), "%s", err_last());
  }
  return res;
}

mscclppResult_t cpu_net_usable(struct cpu_net* net, const char* fn) {
  if (net->broken == mscclppSuccess) return mscclppSuccess;
  return MPP_ERR(net->broken, "%s: this communicator's collectives and sends/receives cannot run after an "
                 "earlier one failed (%s); only mscclppCommDestroy or mscclppCommAbort remain (docs/errors.md)",
                 fn, net->broken_msg);
}

mscclppResult_t cpu_begin(struct algo_comm* ac, const struct algo_args* a, struct cpu_net** out) {
  struct cpu_net* net;
  MPP_CHECK(cpu_net_get(ac, &net));
  MPP_CHECK(cpu_net_usable(net, algo_coll_name(a->coll)));
  net->coll = a->coll;
  MPP_CHECK(cpu_connect_all(net));
  *out = net;
  return mscclppSuccess;
}
