/* peer_info.c - what a rank tells the others about itself at init. */
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/comm.h"
#include "core/comm_internal.h"
#include "sys/gpu.h"
#include "util/bytes.h"
#include "util/err.h"
#include "util/param.h"

uint64_t comm_host_hash(void) {
  uint64_t h = FNV1A_INIT;
  const char* forced = param_str(PARAM_HOST_ID);
  if (forced[0]) return fnv1a_bytes(h, forced, strlen(forced));
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  h = fnv1a_bytes(h, host, strlen(host));
  char boot[64] = "";
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
  }
  return fnv1a_bytes(h, boot, strlen(boot));
}

mscclppResult_t comm_fill_peer_info(const struct mscclppComm* comm, struct peer_info* info) {
  memset(info, 0, sizeof(*info));
  info->rank = comm->rank;
  info->kind = comm->kind;
  info->cuda_dev = comm->cuda_dev;
  info->pid = (int32_t)getpid();
  info->host_hash = comm_host_hash();
  struct stat ns;
  info->pid_ns = stat("/proc/self/ns/pid", &ns) == 0 ? (uint64_t)ns.st_ino : 0;
  if (getrandom(&info->comm_id, sizeof(info->comm_id), 0) != (ssize_t)sizeof(info->comm_id))
    return MPP_ERR(mscclppSystemError, "getrandom() for the communicator id failed");
  if (comm->kind == mscclppRankGpu) MPP_CHECK(gpu_bus_id(comm->cuda_dev, info->bus_id, sizeof(info->bus_id)));
  return mscclppSuccess;
}

/* Checks the allgathered table and derives the communicator id and local rank/size. */
mscclppResult_t comm_adopt_peer_info(struct mscclppComm* comm) {
  uint64_t my_host = comm->peers[comm->rank].host_hash;
  comm->local_rank = 0;
  comm->local_size = 0;
  for (int r = 0; r < comm->nranks; r++) {
    const struct peer_info* p = &comm->peers[r];
    if (p->rank != r || (p->kind != mscclppRankCpu && p->kind != mscclppRankGpu))
      return MPP_ERR(mscclppInternalError, "peer table entry %d is corrupt (rank %d, kind %d)", r, p->rank, p->kind);
    if (p->host_hash != my_host) continue;
    if (r < comm->rank) comm->local_rank++;
    comm->local_size++;
  }
  comm->comm_id = comm->peers[0].comm_id;
  return mscclppSuccess;
}
