/* Misuse of every public handle kind other than the communicator is an error naming the kind, never
 * a crash or a use-after-free (docs/errors.md "Handles"; run under ASan in CI, which is what proves
 * nothing behind a stale handle is read).
 *
 *   handle_misuse TRANSPORT   (2 ranks) for connections, host semaphores, registered memory (also
 *                             mscclppRegisterBuffer's), windows, buffer registrations, proxy services,
 *                             plans and native algorithms: use after the handle's destroy, a double
 *                             destroy, a garbage handle (an unmapped page and heap garbage) and a
 *                             handle of another kind are InvalidUsage naming the kind; after the
 *                             communicator's destroy its dependents are InvalidUsage "destroyed with
 *                             its communicator" (a proxy service, which the communicator does not
 *                             free, accepts only its destroy); a registered plan is the registry's
 *                             to destroy. Also times one handle lookup. */
#define _POSIX_C_SOURCE 200809L
#include <sys/mman.h>

#include <mscclpp/collectives.h>
#include <mscclpp/executor.h>
#include <mscclpp/native_algorithm.h>
#include <mscclpp/port_channel.h>

#include "transport_mp.h"

static const mscclppResult_t USE = mscclppInvalidUsage;

/* Unmapped memory (a dereference crashes) and heap garbage (ASan flags a read of freed memory, and
 * this is live but not an object): neither may be read as a handle. */
static void* unmapped_page;
static void* heap_garbage;

static void garbage_init(void) {
  unmapped_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(unmapped_page != MAP_FAILED);
  heap_garbage = malloc(4096);
  CHECK(heap_garbage != NULL);
  memset(heap_garbage, 0xa5, 4096);
}

static const char* plan_json =
    "{\"name\": \"sr\", \"collective\": \"sendrecv\", \"protocol\": \"Simple\", \"inplace\": false,\n"
    " \"min_message_size\": 16, \"max_message_size\": 1024,\n"
    " \"gpus\": [\n"
    "  {\"id\": 0, \"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0,\n"
    "   \"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [1]}],\n"
    "   \"remote_buffers\": [{\"rank\": 1, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}],\n"
    "   \"threadblocks\": [{\"id\": 0, \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": [0]}],\n"
    "     \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
    "     \"ops\": [{\"name\": \"pws\", \"channel_type\": \"memory\", \"channel_ids\": [0],\n"
    "       \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, "
    "\"size\": 1}]},\n"
    "      {\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]}]}]},\n"
    "  {\"id\": 1, \"input_chunks\": 1, \"output_chunks\": 1, \"scratch_chunks\": 0,\n"
    "   \"channels\": [{\"channel_type\": \"memory\", \"connected_to\": [0]}],\n"
    "   \"remote_buffers\": [{\"rank\": 0, \"type\": \"o\", \"access_channel_types\": [\"memory\"]}],\n"
    "   \"threadblocks\": [{\"id\": 0, \"channels\": [{\"channel_type\": \"memory\", \"channel_ids\": [0]}],\n"
    "     \"remote_buffer_refs\": [{\"access_channel_type\": \"memory\", \"remote_buffer_ids\": [0]}],\n"
    "     \"ops\": [{\"name\": \"pws\", \"channel_type\": \"memory\", \"channel_ids\": [0],\n"
    "       \"src_buff\": [{\"type\": \"i\", \"index\": 0, \"size\": 1}], \"dst_buff\": [{\"buffer_id\": 0, \"index\": 0, "
    "\"size\": 1}]},\n"
    "      {\"name\": \"wait\", \"channel_type\": \"memory\", \"channel_ids\": [0]}]}]}]}\n";

/* Connections: destroyed, double destroy, garbage, another kind; also the lookup's cost. */
static void connections(mscclppComm_t comm, int rank, mscclppTransport_t tr) {
  mscclppConnection_t conn;
  int peer = -1;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 1, tr, &conn));
  CHECK_OK(mscclppConnectionPeer(conn, &peer));
  CHECK(peer == 1 - rank);
  /* One lookup (plus the call's err_clear): well under 1 us. The mean of 200,000 calls; 1 us leaves
   * room for a loaded 2-core machine and ASan (measured: tens of ns without either). */
  const int calls = 200000;
  double t0 = tmp_now();
  for (int i = 0; i < calls; i++) CHECK(mscclppConnectionPeer(conn, &peer) == mscclppSuccess);
  double per = (tmp_now() - t0) / calls * 1e9;
  printf("handle_misuse: mscclppConnectionPeer (one handle lookup) %.0f ns per call\n", per);
  CHECK_MSG(per < 1000, "a handle lookup took %.0f ns", per);
  CHECK_OK(mscclppConnectionDestroy(conn));
  EXPECT(mscclppConnectionPeer(conn, &peer), USE, "connection");
  EXPECT(mscclppConnectionPeer(conn, &peer), USE, "was destroyed");
  EXPECT(mscclppConnectionFlush(conn, 10), USE, "was destroyed");
  EXPECT(mscclppConnectionDestroy(conn), USE, "connection");
  EXPECT(mscclppConnectionDestroy(conn), USE, "was destroyed");
  mscclppHostSemaphore_t sem;
  EXPECT(mscclppHostSemaphoreCreate(comm, conn, &sem), USE, "was destroyed");
  EXPECT(mscclppConnectionDestroy((mscclppConnection_t)unmapped_page), USE, "is not a connection handle");
  EXPECT(mscclppConnectionFlush((mscclppConnection_t)heap_garbage, 10), USE, "is not a connection handle");
  EXPECT(mscclppConnectionDestroy(NULL), mscclppInvalidArgument, "connection handle is NULL");
  CHECK_OK(mscclppBootstrapBarrier(comm));
}

/* Host semaphores and registered memory: destroyed, double destroy, garbage, another kind. */
static void semaphores_and_memory(mscclppComm_t comm, int rank, mscclppTransport_t tr) {
  mscclppConnection_t conn;
  mscclppHostSemaphore_t sem;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 2, tr, &conn));
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  CHECK_OK(mscclppHostSemaphoreDestroy(sem));
  int ready;
  EXPECT(mscclppHostSemaphoreSignal(sem), USE, "host semaphore");
  EXPECT(mscclppHostSemaphoreWait(sem, 10), USE, "was destroyed");
  EXPECT(mscclppHostSemaphorePoll(sem, &ready), USE, "was destroyed");
  EXPECT(mscclppHostSemaphoreDestroy(sem), USE, "was destroyed");
  EXPECT(mscclppHostSemaphoreWait((mscclppHostSemaphore_t)unmapped_page, 10), USE, "is not a host semaphore handle");
  EXPECT(mscclppHostSemaphoreDestroy((mscclppHostSemaphore_t)heap_garbage), USE, "is not a host semaphore handle");
  /* a connection passed as a semaphore, and the other way round */
  EXPECT(mscclppHostSemaphoreSignal((mscclppHostSemaphore_t)conn), USE, "is a connection handle, not a host semaphore");

  char* buf = calloc(1, 4096);
  mscclppRegMem_t mem;
  CHECK_OK(mscclppRegisterMemory(comm, buf, 4096, &mem));
  EXPECT(mscclppConnectionDestroy((mscclppConnection_t)mem), USE, "is a registered memory handle, not a connection");
  CHECK_OK(mscclppRegMemRelease(mem));
  void* p;
  size_t size;
  unsigned char blob[MSCCLPP_REGMEM_BLOB_BYTES];
  size_t len = sizeof(blob);
  EXPECT(mscclppRegMemInfo(mem, &p, &size, NULL), USE, "registered memory");
  EXPECT(mscclppRegMemSerialize(mem, blob, &len), USE, "was destroyed");
  EXPECT(mscclppRegMemRelease(mem), USE, "was destroyed");
  EXPECT(mscclppRegMemRelease((mscclppRegMem_t)unmapped_page), USE, "is not a registered memory handle");
  EXPECT(mscclppRegMemInfo((mscclppRegMem_t)heap_garbage, &p, &size, NULL), USE, "is not a registered memory handle");
  free(buf);
  CHECK_OK(mscclppConnectionDestroy(conn));
  CHECK_OK(mscclppBootstrapBarrier(comm));
}

/* Windows and buffer registrations: deregistered twice, garbage. */
static void windows(mscclppComm_t comm) {
  char* buf = calloc(1, 4096);
  mscclppWindow_t win;
  mscclppBufferReg_t reg;
  CHECK_OK(mscclppCommWindowRegister(comm, buf, 4096, &win));
  CHECK_OK(mscclppCommWindowDeregister(comm, win));
  EXPECT(mscclppCommWindowDeregister(comm, win), USE, "window");
  EXPECT(mscclppCommWindowDeregister(comm, win), USE, "was destroyed");
  EXPECT(mscclppCommWindowDeregister(comm, (mscclppWindow_t)unmapped_page), USE, "is not a window handle");
  CHECK_OK(mscclppCommBufferRegister(comm, buf, 4096, &reg));
  EXPECT(mscclppCommWindowDeregister(comm, (mscclppWindow_t)reg), USE, "is a buffer registration handle, not a window");
  CHECK_OK(mscclppCommBufferDeregister(comm, reg));
  EXPECT(mscclppCommBufferDeregister(comm, reg), USE, "buffer registration");
  EXPECT(mscclppCommBufferDeregister(comm, reg), USE, "was destroyed");
  EXPECT(mscclppCommBufferDeregister(comm, (mscclppBufferReg_t)heap_garbage), USE, "is not a buffer registration handle");
  free(buf);
}

/* Proxy services (host FIFO on a CPU rank): destroyed twice, garbage. */
static void proxies(mscclppComm_t comm) {
  mscclppProxyService_t px;
  CHECK_OK(mscclppProxyServiceCreate(comm, 0, &px));
  CHECK_OK(mscclppProxyServiceStart(px));
  CHECK_OK(mscclppCommReleaseChannels(comm)); /* stops the service that uses them */
  EXPECT(mscclppProxyServiceStart(px), USE, "channels were released");
  CHECK_OK(mscclppProxyServiceDestroy(px));
  CHECK_OK(mscclppProxyServiceCreate(comm, 0, &px));
  CHECK_OK(mscclppProxyServiceDestroy(px));
  EXPECT(mscclppProxyServiceStart(px), USE, "proxy service");
  EXPECT(mscclppProxyServiceCheck(px), USE, "was destroyed");
  EXPECT(mscclppProxyServiceDestroy(px), USE, "was destroyed");
  EXPECT(mscclppProxyServiceStop((mscclppProxyService_t)unmapped_page), USE, "is not a proxy service handle");
}

/* Plans (no communicator): destroyed, double destroy, garbage; PlanDestroy(NULL) stays a no-op. */
static void plans(mscclppComm_t comm) {
  mscclppPlan_t plan;
  mscclppPlanInfo_t info;
  int findings;
  char in[64] = {0}, out[64];
  CHECK_OK(mscclppPlanLoadString(plan_json, strlen(plan_json), "sr", &plan));
  CHECK_OK(mscclppPlanInfo(plan, &info));
  CHECK_OK(mscclppPlanDestroy(plan));
  EXPECT(mscclppPlanInfo(plan, &info), USE, "plan");
  EXPECT(mscclppPlanCheckOrder(plan, &findings, NULL, 0), USE, "was destroyed");
  EXPECT(mscclppExecutePlan(comm, plan, in, out, 16, 16, mscclppFloat, NULL), USE, "was destroyed");
  EXPECT(mscclppPlanDestroy(plan), USE, "was destroyed");
  EXPECT(mscclppPlanDestroy((mscclppPlan_t)unmapped_page), USE, "is not a plan handle");
  EXPECT(mscclppPlanInfo((mscclppPlan_t)heap_garbage, &info), USE, "is not a plan handle");
  EXPECT(mscclppPlanRegister((mscclppPlan_t)heap_garbage, NULL, NULL), USE, "is not a plan handle");
  CHECK_OK(mscclppPlanDestroy(NULL));
  /* a registered plan belongs to the registry: readable, not the user's to destroy */
  int id = 0;
  CHECK_OK(mscclppPlanLoadString(plan_json, strlen(plan_json), "sr", &plan));
  CHECK_OK(mscclppPlanRegister(plan, NULL, &id));
  CHECK_OK(mscclppPlanInfo(plan, &info));
  EXPECT(mscclppPlanDestroy(plan), USE, "belongs to the plan registry");
  CHECK_OK(mscclppPlanUnregister(id));
  EXPECT(mscclppPlanInfo(plan, &info), USE, "was destroyed");
}

static mscclppResult_t noop_launch(mscclppComm_t comm, void* state, void* ctx, const void* in, void* out, size_t inSize,
                                   size_t outSize, mscclppDataType_t dtype, mscclppRedOp_t op, void* stream,
                                   int nblocks, int nthreads, const mscclppNativeExtra* extras, int nextras) {
  (void)comm, (void)state, (void)ctx, (void)in, (void)out, (void)inSize, (void)outSize, (void)dtype, (void)op;
  (void)stream, (void)nblocks, (void)nthreads, (void)extras, (void)nextras;
  return mscclppSuccess;
}

/* Native algorithms (no communicator): destroyed, double destroy, garbage. */
static void natives(mscclppComm_t comm) {
  static const mscclppNativeAlgorithmDef def = {.abiVersion = MSCCLPP_NATIVE_ALGORITHM_ABI_VERSION, .name = "noop",
                                                .collective = "allgather", .launch = noop_launch};
  mscclppNativeAlgorithm_t algo;
  const char *name, *coll;
  char in[16], out[32];
  CHECK_OK(mscclppNativeAlgorithmCreate(&def, &algo));
  CHECK_OK(mscclppNativeAlgorithmInfo(algo, &name, &coll));
  CHECK_OK(mscclppNativeAlgorithmDestroy(algo));
  EXPECT(mscclppNativeAlgorithmInfo(algo, &name, &coll), USE, "native algorithm");
  EXPECT(mscclppNativeAlgorithmExecute(comm, algo, in, out, 16, 32, mscclppFloat, mscclppSum, NULL, 0, 0, NULL, 0), USE,
         "was destroyed");
  EXPECT(mscclppNativeAlgorithmDestroy(algo), USE, "was destroyed");
  EXPECT(mscclppNativeAlgorithmDestroy((mscclppNativeAlgorithm_t)unmapped_page), USE, "is not a native algorithm handle");
}

/* Everything a communicator owns, used after mscclppCommDestroy. */
static void after_comm_destroy(int rank, mscclppTransport_t tr) {
  int r, n;
  mscclppComm_t comm = tmp_init(&r, &n);
  char* buf = calloc(1, 4096);
  mscclppConnection_t conn;
  mscclppHostSemaphore_t sem;
  mscclppRegMem_t mem;
  mscclppRegisteredMemory rm;
  mscclppWindow_t win;
  mscclppBufferReg_t reg;
  mscclppProxyService_t px;
  CHECK_OK(mscclppConnectionCreate(comm, 1 - rank, 3, tr, &conn));
  CHECK_OK(mscclppHostSemaphoreCreate(comm, conn, &sem));
  CHECK_OK(mscclppRegisterMemory(comm, buf, 4096, &mem));
  CHECK_OK(mscclppRegisterBuffer(comm, buf + 2048, 1024, &rm));
  CHECK_OK(mscclppCommWindowRegister(comm, buf + 1024, 1024, &win));
  CHECK_OK(mscclppCommBufferRegister(comm, buf + 3072, 1024, &reg));
  CHECK_OK(mscclppProxyServiceCreate(comm, 0, &px));
  int sem_id = -1;
  CHECK_OK(mscclppProxyServiceAddSemaphore(px, conn, &sem_id));
  CHECK_OK(mscclppProxyServiceStart(px)); /* still running at the destroy: stopped by it, first */
  CHECK_OK(mscclppBootstrapBarrier(comm));
  CHECK_OK(mscclppCommDestroy(comm));
  const char* gone = "destroyed with its communicator";
  int peer, ready;
  EXPECT(mscclppConnectionPeer(conn, &peer), USE, gone);
  EXPECT(mscclppConnectionPeer(conn, &peer), USE, "connection");
  EXPECT(mscclppConnectionDestroy(conn), USE, gone);
  EXPECT(mscclppHostSemaphorePoll(sem, &ready), USE, gone);
  EXPECT(mscclppHostSemaphoreSignal(sem), USE, "host semaphore");
  EXPECT(mscclppHostSemaphoreDestroy(sem), USE, gone);
  EXPECT(mscclppRegMemInfo(mem, NULL, NULL, NULL), USE, gone);
  EXPECT(mscclppRegMemRelease(mem), USE, "registered memory");
  EXPECT(mscclppRegisteredMemoryRelease(&rm), USE, gone); /* frees only its array */
  CHECK(rm.local == NULL && rm.remote == NULL);
  CHECK_OK(mscclppRegisteredMemoryRelease(&rm)); /* zeroed: nothing left */
  EXPECT(mscclppCommWindowDeregister(comm, win), USE, gone);
  EXPECT(mscclppCommWindowDeregister(comm, win), USE, "window");
  EXPECT(mscclppCommBufferDeregister(comm, reg), USE, gone);
  EXPECT(mscclppProxyServiceStart(px), USE, "only its destroy call remains");
  EXPECT(mscclppProxyServiceStop(px), USE, "only its destroy call remains");
  CHECK_OK(mscclppProxyServiceDestroy(px));
  EXPECT(mscclppProxyServiceDestroy(px), USE, "was destroyed");
  free(buf);
}

int main(int argc, char** argv) {
  CHECK_MSG(argc == 2, "usage: handle_misuse shm|tcp|auto");
  mscclppTransport_t tr = tmp_transport(argv[1]);
  garbage_init();
  int rank, n;
  mscclppComm_t comm = tmp_init(&rank, &n);
  CHECK(n == 2);
  connections(comm, rank, tr);
  semaphores_and_memory(comm, rank, tr);
  windows(comm);
  proxies(comm);
  plans(comm);
  natives(comm);
  CHECK_OK(mscclppCommDestroy(comm));
  after_comm_destroy(rank, tr);
  munmap(unmapped_page, 4096);
  free(heap_garbage);
  printf("handle_misuse %s: rank %d ok\n", argv[1], rank);
  return 0;
}
