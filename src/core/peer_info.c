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
#include "util/log.h"
#include "util/param.h"

/* The inode of a namespace of this process (/proc/self/ns/<kind>), 0 when unknown. */
static uint64_t ns_inode(const char* kind) {
  char path[64];
  struct stat st;
  snprintf(path, sizeof(path), "/proc/self/ns/%s", kind);
  return stat(path, &st) == 0 ? (uint64_t)st.st_ino : 0;
}

/* The machine part of the identity into out: MSCCLPP_HOSTID (or its older name MSCCLPP_HOST_ID)
 * when set, else "<host name>/<boot id>". */
static void host_machine_id(char* out, size_t len) {
  const char* forced = param_str(PARAM_HOSTID);
  if (!forced[0]) forced = param_str(PARAM_HOST_ID);
  if (forced[0]) {
    snprintf(out, len, "%s", forced);
    return;
  }
  char host[256] = "", boot[64] = "";
  gethostname(host, sizeof(host) - 1);
  FILE* f = fopen("/proc/sys/kernel/random/boot_id", "re");
  if (f) {
    if (!fgets(boot, sizeof(boot), f)) boot[0] = '\0';
    fclose(f);
  }
  boot[strcspn(boot, "\n")] = '\0';
  snprintf(out, len, "%s/%s", host, boot);
}

/* The host identity is the machine part and the network namespace: ranks in different network
 * namespaces of one machine are different hosts, always (the fd service that shm and cuda-ipc
 * need listens on abstract UNIX sockets, which exist per network namespace, so such ranks could
 * not share memory anyway; they connect over the network like ranks of two machines). */
uint64_t comm_host_hash(void) {
  char machine[320];
  host_machine_id(machine, sizeof(machine));
  uint64_t netns = ns_inode("net");
  uint64_t h = fnv1a_bytes(FNV1A_INIT, machine, strlen(machine));
  h = fnv1a_bytes(h, &netns, sizeof(netns));
  LOG_INFO_(LOG_SUB_INIT, "host identity: %s%s, network namespace %llu -> host hash %016llx", machine,
            param_str(PARAM_HOSTID)[0] || param_str(PARAM_HOST_ID)[0] ? " (MSCCLPP_HOSTID)" : "",
            (unsigned long long)netns, (unsigned long long)h);
  return h;
}

mscclppResult_t comm_fill_peer_info(const struct mscclppComm* comm, struct peer_info* info) {
  memset(info, 0, sizeof(*info));
  info->rank = comm->rank;
  info->kind = comm->kind;
  info->cuda_dev = comm->cuda_dev;
  info->pid = (int32_t)getpid();
  info->host_hash = comm_host_hash();
  info->pid_ns = ns_inode("pid");
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
