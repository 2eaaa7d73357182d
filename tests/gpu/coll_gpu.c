/* The built-in collectives on GPU ranks: every collective x datatypes x operators x in/out of place
 * at odd sizes, inputs from src/algo/verify.h (exact in every order), results copied back and
 * checked on the host. Each call runs on a non-blocking stream; several calls are queued before
 * one check so that back-to-back launches (LL flag reuse, bulk inbox reuse) are exercised too.
 *
 *   coll_gpu VARIANT     ll: the LL algorithms (one-shot allreduce)   ll2: two-shot LL allreduce
 *                        bulk1: one-shot bulk allreduce (small bulk inbox)
 *                        bulk: the bulk algorithms with a small bulk inbox (many pipeline steps)
 *                        table: the tuning table's choice, sizes across the crossovers
 *                        zc: the zero-copy algorithms; each batch is captured into a CUDA graph
 *                        and replayed once (in-place alltoall and premulsum take the bulk path);
 *                        the communicator's first collective is captured (its setup with it);
 *                        reductions in two passes, reduce on 3+ ranks as the ring (zcg: one pass,
 *                        no ring)
 *                        zcg: zc on a blocking stream captured in global mode (the strictest)
 *                        zcw / zcwc / zcr: zc eagerly on windows (zcwc: checked) / registered buffers
 *                        st / stg / stp: the staged algorithms eager / captured / with a small stage
 *                        (st: eager calls go zero copy once every rank's buffers are announced;
 *                        st and stpm: two-pass reductions, the broadcast's push chain and the
 *                        reduce ring)
 *                        stn: st with eager zero copy off (every call through the stage)
 *                        stm: st with the last rank moving to fresh buffers now and then, so that
 *                        calls its peers cannot map yet stay staged while the others go zero copy
 *                        stpm: stm with stp's small stage (whole-call probes that miss, then the
 *                        pieces or the bulk launches behind them do the call)
 *                        xh / xhg: 2 stand-in hosts (MSCCLPP_HOSTID: ranks 0..n/2-1 and the rest),
 *                        the table's cross-host algorithms eager / captured; xhh: the host family
 *                        forced on interleaved hosts (host = rank % 2); xhp: the table with 4 KiB
 *                        pieces of pinned host memory (every count loops); xhn: as xh on hosts
 *                        made otherwise (network namespaces: tests/netns/netns_hosts.sh)
 * Exits 77 without CUDA or with fewer GPUs than local ranks. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/gpu/gpu.h"
#include "algo/verify.h"
#include "helpers.h"

#if !MSCCLPP_HAVE_CUDA
int main(void) { TEST_SKIP("built without CUDA"); }
#else
#include <cuda_runtime.h>

#include "gpu/gpu_rank.h"

static struct {
  mscclppComm_t comm;
  int rank, n;
  cudaStream_t stream;
  char *send, *recv, *host, *scal; /* scal: device-resident premulsum scalars, 8 bytes per call */
  size_t cap;
  uint64_t seed;
  long calls;
  int graph; /* capture each batch into a CUDA graph */
  int windows; /* send and recv are registered windows: eager calls take the zero-copy algorithms */
  int registered; /* send and recv are local registrations: eager calls swap and take zero copy */
  int staged; /* the staged algorithms (any call) */
  int moving; /* stm: the last rank moves to fresh buffers every MOVE_EVERY batches */
  char* old[32]; /* stm: buffers moved from (freed at the end) */
  int nold;
  int xhost; /* ranks on 2 stand-in hosts */
  enum cudaStreamCaptureMode mode;
} g = {.rank = -1};

static void init(void) {
  gpu_rank_init(&g.comm, &g.rank, &g.n, &g.stream);
  g.cap = (size_t)8 << 20;
  CUDA_OK(cudaMalloc((void**)&g.send, g.cap));
  CUDA_OK(cudaMalloc((void**)&g.recv, g.cap));
  CUDA_OK(cudaMalloc((void**)&g.scal, 64));
  g.host = malloc(g.cap);
  CHECK(g.host != NULL);
}

struct shape {
  size_t count, in, out; /* API count, elements of input and output */
};

static struct shape shape_of(int coll, size_t count) {
  struct shape s = {count, count, count};
  if (coll == ALGO_COLL_ALLGATHER || coll == ALGO_COLL_ALLTOALL) s.out = count * (size_t)g.n;
  if (coll == ALGO_COLL_REDUCESCATTER || coll == ALGO_COLL_ALLTOALL) s.in = count * (size_t)g.n;
  return s;
}

/* Input and output of a call; in place follows NCCL. Calls of one batch use disjoint slots. */
static void placement(int coll, const struct shape* s, size_t es, int inplace, size_t slot, char** in, char** out) {
  *in = g.send + slot, *out = g.recv + slot;
  if (!inplace) return;
  *in = *out;
  if (coll == ALGO_COLL_ALLGATHER) *in = *out + (size_t)g.rank * s->count * es;
  if (coll == ALGO_COLL_REDUCESCATTER) *out = *in + (size_t)g.rank * s->count * es;
}

static mscclppResult_t call(int coll, const struct shape* s, int dtype, mscclppRedOp_t op, int root, char* in, char* out) {
  mscclppDataType_t t = (mscclppDataType_t)dtype;
  g.calls++;
  switch (coll) {
    case ALGO_COLL_ALLREDUCE: return mscclppAllReduce(in, out, s->count, t, op, g.comm, g.stream);
    case ALGO_COLL_ALLGATHER: return mscclppAllGather(in, out, s->count, t, g.comm, g.stream);
    case ALGO_COLL_REDUCESCATTER: return mscclppReduceScatter(in, out, s->count, t, op, g.comm, g.stream);
    case ALGO_COLL_BROADCAST: return mscclppBroadcast(in, out, s->count, t, root, g.comm, g.stream);
    case ALGO_COLL_REDUCE: return mscclppReduce(in, out, s->count, t, op, root, g.comm, g.stream);
    default: return mscclppAllToAll(in, out, s->count, t, g.comm, g.stream);
  }
}

/* Wrong elements of this rank's output of one call. */
static size_t check(int coll, const struct shape* s, const struct verify_spec* spec, size_t es, int root, const char* out) {
  if (coll == ALGO_COLL_REDUCE && g.rank != root) return 0;
  CUDA_OK(cudaMemcpy(g.host, out, s->out * es, cudaMemcpyDeviceToHost));
  size_t c = s->count, wrong = 0;
  switch (coll) {
    case ALGO_COLL_ALLREDUCE:
    case ALGO_COLL_REDUCE: return verify_check_reduced(spec, 0, c, g.host);
    case ALGO_COLL_REDUCESCATTER: return verify_check_reduced(spec, (size_t)g.rank * c, c, g.host);
    case ALGO_COLL_BROADCAST: return verify_check_copy(spec, root, 0, c, g.host);
    case ALGO_COLL_ALLGATHER:
      for (int q = 0; q < g.n; q++) wrong += verify_check_copy(spec, q, 0, c, g.host + (size_t)q * c * es);
      return wrong;
    default:
      for (int q = 0; q < g.n; q++) wrong += verify_check_copy(spec, q, (size_t)g.rank * c, c, g.host + (size_t)q * c * es);
      return wrong;
  }
}

#define BATCH 3

/* Ends the capture of a batch and runs the graph once. */
static void replay_once(void) {
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamEndCapture(g.stream, &graph));
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, g.stream));
  CUDA_OK(cudaStreamSynchronize(g.stream));
  CUDA_OK(cudaGraphExecDestroy(exec));
  CUDA_OK(cudaGraphDestroy(graph));
}

/* Graph-only launches on this rank so far (zc and ce check that the captured calls took them). */
static uint64_t zc_launches(void) {
  struct algo_comm* ac = NULL;
  CHECK_OK(algo_comm_get(g.comm, &ac));
  return ac->gnet ? ac->gnet->graph_launches : 0;
}

/* stm: the last rank's next buffers, every MOVE_EVERY batches (up to 15 moves: 30 buffers). */
#define MOVE_EVERY 37
static void maybe_move(void) {
  static long batches = 0;
  if (!g.moving || g.rank != g.n - 1 || ++batches % MOVE_EVERY != 0 || g.nold + 2 > 30) return;
  g.old[g.nold++] = g.send, g.old[g.nold++] = g.recv;
  CUDA_OK(cudaMalloc((void**)&g.send, g.cap));
  CUDA_OK(cudaMalloc((void**)&g.recv, g.cap));
}

/* Staged launches that went zero copy on this rank so far. */
static uint64_t ezc_hits(void) {
  struct algo_comm* ac = NULL;
  CHECK_OK(algo_comm_get(g.comm, &ac));
  return ac->gnet ? gpu_ezc_hits(ac->gnet) : 0;
}

/* BATCH calls of one case queued back to back (fresh inputs each), then every output checked. */
static void run_case(int coll, int dtype, int op, int inplace, size_t count) {
  maybe_move();
  size_t es = mscclppDataTypeSize((mscclppDataType_t)dtype), slot_bytes = g.cap / BATCH / 64 * 64;
  struct shape s = shape_of(coll, count);
  int root = (int)(count % (size_t)g.n);
  if ((s.in > s.out ? s.in : s.out) * es > slot_bytes) return;
  struct verify_spec spec[BATCH];
  mscclppRedOp_t rop[BATCH];
  char *in[BATCH], *out[BATCH];
  for (int b = 0; b < BATCH; b++) {
    spec[b] = (struct verify_spec){.dtype = dtype, .op = algo_coll_reduces(coll) ? op : -1, .nranks = g.n, .seed = ++g.seed};
    placement(coll, &s, es, inplace, (size_t)b * slot_bytes, &in[b], &out[b]);
    rop[b] = (mscclppRedOp_t)(op == ELEM_OP_PREMUL ? 0 : op);
    if (algo_coll_reduces(coll) && op == ELEM_OP_PREMUL) {
      unsigned char scalar[8] = {0};
      verify_scalar(&spec[b], g.rank, scalar);
      if (b == 1) { /* one call of each batch reads its scalar from device memory in the kernel */
        CUDA_OK(cudaMemcpy(g.scal + 8 * b, scalar, 8, cudaMemcpyHostToDevice));
        CHECK_OK(mscclppRedOpCreatePreMulSum(&rop[b], g.scal + 8 * b, (mscclppDataType_t)dtype, mscclppScalarDevice, g.comm));
      } else {
        CHECK_OK(mscclppRedOpCreatePreMulSum(&rop[b], scalar, (mscclppDataType_t)dtype, mscclppScalarHostImmediate, g.comm));
      }
    }
    CUDA_OK(cudaMemset(out[b], 0xa5, s.out * es));
    if (coll != ALGO_COLL_BROADCAST || g.rank == root) {
      verify_fill(&spec[b], g.rank, 0, s.in, g.host);
      CUDA_OK(cudaMemcpy(in[b], g.host, s.in * es, cudaMemcpyHostToDevice));
    }
  }
  CUDA_OK(cudaDeviceSynchronize());
  if (g.graph) CUDA_OK(cudaStreamBeginCapture(g.stream, g.mode));
  for (int b = 0; b < BATCH; b++) {
    mscclppResult_t r = call(coll, &s, dtype, rop[b], root, in[b], out[b]);
    CHECK_MSG(r == mscclppSuccess, "rank %d: %s %s %s count %zu: %s", g.rank, algo_coll_name(coll), elem_dtype_name(dtype),
              algo_coll_reduces(coll) ? elem_op_name(op) : "-", count, mscclppGetLastError());
  }
  if (g.graph) replay_once();
  CUDA_OK(cudaStreamSynchronize(g.stream));
  mscclppDeviceError de;
  CHECK_OK(mscclppCommGetDeviceError(g.comm, &de));
  if (de.flag) {
    char text[256] = "";
    mscclppDeviceErrorString(&de, text, sizeof(text));
    TEST_FAIL("rank %d: %s count %zu: device wait failed: %s", g.rank, algo_coll_name(coll), count, text);
  }
  for (int b = 0; b < BATCH; b++) {
    size_t wrong = check(coll, &s, &spec[b], es, root, out[b]);
    CHECK_MSG(wrong == 0, "rank %d: %s %s %s %s count %zu (call %d of the batch): %zu wrong elements", g.rank,
              algo_coll_name(coll), elem_dtype_name(dtype), algo_coll_reduces(coll) ? elem_op_name(op) : "-",
              inplace ? "in place" : "out of place", count, b, wrong);
    if (rop[b] >= mscclppNumOps) CHECK_OK(mscclppRedOpDestroy(rop[b], g.comm));
  }
}

/* Ring send/recv in one group (to rank+1, from rank-1) plus a send to and receive from itself. */
static void run_sendrecv(size_t count) {
  size_t bytes = count * 4, half = g.cap / 2;
  struct verify_spec spec = {.dtype = 7, .op = -1, .nranks = g.n, .seed = ++g.seed};
  int next = (g.rank + 1) % g.n, prev = (g.rank + g.n - 1) % g.n;
  if (bytes * 2 > half) return;
  verify_fill(&spec, g.rank, 0, count, g.host);
  CUDA_OK(cudaMemcpy(g.send, g.host, bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(g.recv, 0xa5, 2 * bytes));
  CUDA_OK(cudaDeviceSynchronize());
  CHECK_OK(mscclppGroupStart());
  CHECK_OK(mscclppSend(g.send, count, mscclppFloat, next, g.comm, g.stream));
  CHECK_OK(mscclppRecv(g.recv, count, mscclppFloat, prev, g.comm, g.stream));
  CHECK_OK(mscclppSend(g.send, count, mscclppFloat, g.rank, g.comm, g.stream));
  CHECK_OK(mscclppRecv(g.recv + bytes, count, mscclppFloat, g.rank, g.comm, g.stream));
  CHECK_OK(mscclppGroupEnd());
  g.calls++;
  CUDA_OK(cudaStreamSynchronize(g.stream));
  CUDA_OK(cudaMemcpy(g.host, g.recv, 2 * bytes, cudaMemcpyDeviceToHost));
  size_t wrong = verify_check_copy(&spec, prev, 0, count, g.host);
  wrong += verify_check_copy(&spec, g.rank, 0, count, g.host + bytes);
  CHECK_MSG(wrong == 0, "rank %d: sendrecv count %zu: %zu wrong elements", g.rank, count, wrong);
}

/* Ranks on stand-in hosts: the communicator sees 2 hosts, and every collective's choice (forced or
 * the table's) is one of the cross-host algorithms. */
static void check_xhost_selection(void) {
  struct algo_comm* ac = NULL;
  CHECK_OK(algo_comm_get(g.comm, &ac));
  CHECK_MSG(ac->nhosts == 2, "rank %d: %d hosts, want 2 (MSCCLPP_HOSTID)", g.rank, ac->nhosts);
  for (int coll = 0; coll < ALGO_COLL_SENDRECV; coll++)
    for (size_t bytes = 8; bytes <= ((size_t)1 << 30); bytes <<= 6) {
      const struct algo_desc* d = NULL;
      CHECK_OK(algo_select((enum algo_coll)coll, mscclppRankGpu, ac->nranks, ac->nhosts, bytes, 7, 0, &d));
      CHECK_MSG(d != NULL && (strstr(d->name, "_hier") || strstr(d->name, "_host")), "rank %d: %s of %zu bytes: %s",
                g.rank, algo_coll_name(coll), bytes, d ? d->name : "none");
    }
}

static const int dtypes[] = {7, 9, 6, 2, 1, 8, 10, 4, 11, 3, 0, 5};

/* The bulk copy and zero-copy kernels keep two 512-thread blocks per SM (their register caps), so
 * the default 256 blocks run in one wave on a 132-SM GPU. */
static void check_residency(void) {
  int bulk = 0, zc = 0;
  CHECK_OK(gpu_resident_bulk(&bulk));
  CHECK_OK(gpu_resident_zc(&zc));
  CHECK_MSG(bulk >= 2 && zc >= 2, "rank %d: blocks per SM: bulk copy kernel %d, zero-copy kernel %d (want 2 each)", g.rank,
            bulk, zc);
}

int main(int argc, char** argv) {
  const char* variant = argc > 1 ? argv[1] : "table";
  if (strcmp(variant, "ll") == 0)
    setenv("MSCCLPP_ALGO", "gpu_allreduce_ll1,gpu_allgather_ll,gpu_reducescatter_ll,gpu_broadcast_ll,gpu_reduce_ll,gpu_alltoall_ll", 1);
  else if (strcmp(variant, "ll2") == 0)
    setenv("MSCCLPP_ALGO", "gpu_allreduce_ll2", 1);
  else if (strcmp(variant, "bulk1") == 0) {
    setenv("MSCCLPP_ALGO", "gpu_allreduce_bulk1", 1);
    setenv("MSCCLPP_ALGO_GPU_BULK_SLOT", "16384", 1); /* many steps at small sizes */
  }
  else if (strcmp(variant, "bulk") == 0) {
    setenv("MSCCLPP_ALGO", "gpu_allreduce_bulk,gpu_allgather_bulk,gpu_reducescatter_bulk,gpu_broadcast_bulk,gpu_reduce_bulk,gpu_alltoall_bulk", 1);
    setenv("MSCCLPP_ALGO_GPU_BULK_SLOT", "16384", 1); /* 512 B per block: many steps at small sizes */
  } else if (strcmp(variant, "zc") == 0 || strcmp(variant, "zcg") == 0) {
    setenv("MSCCLPP_ALGO", "gpu_allreduce_zc,gpu_allgather_zc,gpu_reducescatter_zc,gpu_alltoall_zc,gpu_broadcast_zc,gpu_reduce_zc", 1);
    setenv("MSCCLPP_ALGO_GPU_ZC_CHUNK", "4096", 1); /* several blocks at small sizes */
    if (strcmp(variant, "zc") == 0) { /* zcg: one pass, and on 2 ranks the rooted calls' halves */
      setenv("MSCCLPP_ALGO_GPU_ZC_TWO_PASS_MIN", "4096", 1);
      setenv("MSCCLPP_ALGO_GPU_ROOT_ALONE_MIN", "0", 1);
      setenv("MSCCLPP_ALGO_GPU_REDUCE_RING_MIN", "0", 1); /* 3+ ranks: the reduce ring, many 256 B steps */
      setenv("MSCCLPP_ALGO_GPU_REDUCE_RING_STEP", "256", 1);
    }
    g.graph = 1;
  } else if (strcmp(variant, "zcw") == 0 || strcmp(variant, "zcwc") == 0) { /* eager, on windows (zcwc: checked) */
    setenv("MSCCLPP_ALGO", "gpu_allreduce_zc,gpu_allgather_zc,gpu_reducescatter_zc,gpu_alltoall_zc", 1);
    setenv("MSCCLPP_ALGO_GPU_ZC_CHUNK", "4096", 1);
    if (strcmp(variant, "zcwc") == 0) setenv("MSCCLPP_WINDOW_CHECK", "1", 1);
    g.windows = 1;
  } else if (strcmp(variant, "zcr") == 0) { /* eager, on local registrations (every size swaps) */
    setenv("MSCCLPP_ALGO", "gpu_allreduce_zc,gpu_allgather_zc,gpu_reducescatter_zc,gpu_alltoall_zc", 1);
    setenv("MSCCLPP_ALGO_GPU_ZC_CHUNK", "4096", 1);
    setenv("MSCCLPP_REGISTERED_ZC_MIN", "0", 1);
    g.registered = 1;
  } else if (strcmp(variant, "st") == 0 || strcmp(variant, "stg") == 0 || strcmp(variant, "stp") == 0 ||
             strcmp(variant, "stn") == 0 || strcmp(variant, "stm") == 0 || strcmp(variant, "stpm") == 0) {
    /* staged: eager (st), captured (stg), and with a small stage (stp: allreduce in pieces, the
     * others' larger calls on the bulk kernel, each eager such call behind a whole-call probe that
     * goes zero copy; stpm: the same with the last rank moving to new buffers, so that probes miss
     * and the pieces or bulk launches after them do the call) */
    setenv("MSCCLPP_ALGO", "gpu_allreduce_stage,gpu_allgather_stage,gpu_reducescatter_stage,gpu_alltoall_stage,"
                           "gpu_broadcast_stage,gpu_reduce_stage", 1);
    setenv("MSCCLPP_ALGO_GPU_ZC_CHUNK", "4096", 1);
    if (strcmp(variant, "stp") == 0 || strcmp(variant, "stpm") == 0) setenv("MSCCLPP_ALGO_GPU_BULK_SLOT", "16384", 1);
    if (strcmp(variant, "stn") == 0) setenv("MSCCLPP_ALGO_GPU_EAGER_ZC", "0", 1);
    if (strcmp(variant, "st") == 0 || strcmp(variant, "stpm") == 0) {
      /* at the test's sizes: two-pass reductions, the broadcast's push chain and on 2 ranks the
       * rooted calls' root alone (the others keep one pass, every rank copying from the root and
       * the halves) */
      setenv("MSCCLPP_ALGO_GPU_ZC_TWO_PASS_MIN", "4096", 1);
      setenv("MSCCLPP_ALGO_GPU_BCAST_CHAIN_MIN", "0", 1);
      setenv("MSCCLPP_ALGO_GPU_ROOT_ALONE_MIN", "0", 1);
      /* 3+ ranks: the reduce ring (stpm: one 128 B slot per block, each step waits for its credit) */
      setenv("MSCCLPP_ALGO_GPU_REDUCE_RING_MIN", "0", 1);
    }
    g.moving = strcmp(variant, "stm") == 0 || strcmp(variant, "stpm") == 0;
    g.graph = strcmp(variant, "stg") == 0;
    g.staged = 1;
  } else if (strncmp(variant, "xh", 2) == 0) {
    int r = gpu_rank_env_int("MSCCLPP_RANK", 0), n = gpu_rank_env_int("MSCCLPP_WORLD_SIZE", 1);
    int host = strcmp(variant, "xhh") == 0 ? r % 2 : r * 2 / (n > 1 ? n : 1);
    char id[32];
    snprintf(id, sizeof(id), "coll-gpu-host%d", host);
    if (strcmp(variant, "xhn") != 0) setenv("MSCCLPP_HOSTID", id, 1);
    if (strcmp(variant, "xhh") == 0)
      setenv("MSCCLPP_ALGO", "gpu_allreduce_host,gpu_allgather_host,gpu_reducescatter_host,gpu_broadcast_host,"
                             "gpu_reduce_host,gpu_alltoall_host", 1);
    if (strcmp(variant, "xhp") == 0) setenv("MSCCLPP_ALGO_GPU_HOST_CHUNK", "4096", 1);
    g.graph = strcmp(variant, "xhg") == 0;
    g.xhost = 1;
  } else if (strcmp(variant, "table") != 0) {
    TEST_FAIL("unknown variant '%s' (ll, ll2, bulk1, bulk, table, zc, zcg, zcw, zcwc, zcr, st, stg, stp, stn, stm, stpm, xh, xhg, xhh, xhp, xhn)",
              variant);
  }
  init();
  check_residency();
  mscclppWindow_t wins[2] = {NULL, NULL};
  if (g.windows) {
    CHECK_OK(mscclppCommWindowRegister(g.comm, g.send, g.cap, &wins[0]));
    CHECK_OK(mscclppCommWindowRegister(g.comm, g.recv, g.cap, &wins[1]));
  }
  mscclppBufferReg_t regs[2] = {NULL, NULL};
  if (g.registered) {
    CHECK_OK(mscclppCommBufferRegister(g.comm, g.send, g.cap, &regs[0]));
    CHECK_OK(mscclppCommBufferRegister(g.comm, g.recv, g.cap, &regs[1]));
  }
  g.mode = cudaStreamCaptureModeThreadLocal;
  if (strcmp(variant, "zcg") == 0) { /* a blocking stream: legacy-stream work of the setup would break the capture */
    CUDA_OK(cudaStreamCreate(&g.stream));
    g.mode = cudaStreamCaptureModeGlobal;
  }
  static const size_t small[] = {1, 7, 1001, 12345};
  static const size_t big[] = {1, 333, 70001, 300007};
  if (g.xhost) check_xhost_selection();
  const size_t* counts = strcmp(variant, "table") == 0 || g.xhost || strncmp(variant, "bulk", 4) == 0 || g.graph || g.windows || g.registered || g.staged ? big : small;
  uint64_t zc_seen = 0, hits_seen = 0;
  int ndt = gpu_rank_env_int("COLL_GPU_DTYPES", (int)(sizeof(dtypes) / sizeof(dtypes[0])));
  for (int coll = 0; coll < ALGO_COLL_SENDRECV; coll++) {
    int allreduce_only = strcmp(variant, "ll2") == 0 || strcmp(variant, "bulk1") == 0;
    if (allreduce_only && coll != ALGO_COLL_ALLREDUCE) continue;
    for (int di = 0; di < ndt; di++)
      for (int op = 0; op < (algo_coll_reduces(coll) ? ELEM_OP_COUNT : 1); op++)
        for (int inplace = 0; inplace < 2; inplace++)
          for (int k = 0; k < 4; k++) run_case(coll, dtypes[di], op, inplace, counts[k]);
    if (g.rank == 0) printf("coll_gpu %s: %s passed (%ld calls so far)\n", variant, algo_coll_name(coll), g.calls);
    int rooted = algo_coll_rooted(coll); /* zero copy: captured or staged only */
    if (!g.xhost && (g.graph || g.windows || g.registered || g.staged) && (!rooted || g.staged || g.graph)) {
      uint64_t z = zc_launches();
      CHECK_MSG(z > zc_seen, "rank %d: no %s launch for the %s calls", g.rank, variant, algo_coll_name(coll));
      zc_seen = z;
    }
    if (g.staged && !g.graph) {
      /* eager staged calls: zero copy once the buffers are known (st, stm, stp), never with it off */
      uint64_t h = ezc_hits();
      int want = strcmp(variant, "stn") != 0;
      CHECK_MSG(want ? h > hits_seen : h == 0, "rank %d: %s: %llu staged launches went zero copy (%s)", g.rank,
                algo_coll_name(coll), (unsigned long long)h, want ? "want more than before" : "want none");
      hits_seen = h;
    }
  }
  if (g.moving) { /* some calls stayed staged while the last rank's new buffers were announced */
    uint64_t h = ezc_hits(), all = zc_launches();
    CHECK_MSG(h < all, "rank %d: stm: all %llu staged launches went zero copy", g.rank, (unsigned long long)all);
    if (g.rank == 0) printf("coll_gpu %s: %llu of %llu staged launches zero copy\n", variant, (unsigned long long)h, (unsigned long long)all);
  }
  if (strcmp(variant, "ll2") != 0 && strcmp(variant, "bulk1") != 0) {
    for (int k = 0; k < 4; k++) run_sendrecv(counts[k]);
    if (g.rank == 0) printf("coll_gpu %s: sendrecv passed\n", variant);
  }
  for (int w = 0; w < 2; w++) {
    if (wins[w]) CHECK_OK(mscclppCommWindowDeregister(g.comm, wins[w]));
    if (regs[w]) CHECK_OK(mscclppCommBufferDeregister(g.comm, regs[w]));
  }
  CHECK_OK(mscclppBootstrapBarrier(g.comm));
  cudaFree(g.scal);
  for (int i = 0; i < g.nold; i++) cudaFree(g.old[i]);
  cudaFree(g.send);
  cudaFree(g.recv);
  free(g.host);
  CHECK_OK(mscclppCommDestroy(g.comm));
  return 0;
}
#endif
