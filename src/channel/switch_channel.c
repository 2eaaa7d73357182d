/* switch_channel.c - making an emulated switch channel: every member of the group sends its
 * registered buffer to every other member and maps theirs. No multicast object is ever made here
 * (see mscclpp/switch_channel.h). */
#include <mscclpp/switch_channel.h>

#include <string.h>

#include "bootstrap/bootstrap.h"
#include "channel/ext.h"
#include "core/comm.h"
#include "core/connection.h"
#include "util/err.h"
#include "util/log.h"

#define SWITCH_MSG_MAGIC 0x48435753u /* "SWCH" */

struct switch_msg {
  uint32_t magic;
  uint32_t group;  /* hash of the member list */
  int32_t rank;
  int32_t status;  /* mscclppSuccess, or this member's failure */
  uint64_t blob_len;
  uint8_t blob[MSCCLPP_REGMEM_BLOB_BYTES];
};

/* Checks the member list; returns this rank's index in it through *me. */
static mscclppResult_t check_group(struct mscclppComm* comm, const int* ranks, int n, int* me) {
  MPP_CHECK_ARG(ranks != NULL, "mscclppSwitchChannelCreate: ranks is NULL");
  MPP_CHECK_ARG(n >= 2 && n <= MSCCLPP_SWITCH_MAX_RANKS, "mscclppSwitchChannelCreate: %d members (2..%d)", n,
                MSCCLPP_SWITCH_MAX_RANKS);
  *me = -1;
  for (int i = 0; i < n; i++) {
    MPP_CHECK_ARG(ranks[i] >= 0 && ranks[i] < comm->nranks, "mscclppSwitchChannelCreate: member %d is rank %d, not in [0, %d)",
                  i, ranks[i], comm->nranks);
    for (int j = 0; j < i; j++)
      MPP_CHECK_ARG(ranks[j] != ranks[i], "mscclppSwitchChannelCreate: rank %d is listed twice", ranks[i]);
    if (ranks[i] == comm->rank) *me = i;
  }
  MPP_CHECK_ARG(*me >= 0, "mscclppSwitchChannelCreate: this rank (%d) is not a member", comm->rank);
  return mscclppSuccess;
}

static uint32_t group_hash(const int* ranks, int n) {
  uint32_t h = 2166136261u;
  for (int i = 0; i < n; i++) h = (h ^ (uint32_t)ranks[i]) * 16777619u;
  return h & 0xffffffu;
}

/* Maps member `from`'s buffer from its message. */
static mscclppResult_t adopt(struct chan_ext* x, const struct switch_msg* m, int from, uint32_t group, void** ptr) {
  if (m->magic != SWITCH_MSG_MAGIC || m->rank != from || m->group != group)
    return MPP_ERR(mscclppRemoteError, "switch channel: malformed message from rank %d (another group made at once?)", from);
  if (m->status != mscclppSuccess)
    return MPP_ERR(mscclppRemoteError, "switch channel: rank %d failed to offer its buffer (see its log)", from);
  if (m->blob_len == 0 || m->blob_len > MSCCLPP_REGMEM_BLOB_BYTES)
    return MPP_ERR(mscclppRemoteError, "switch channel: rank %d's blob length %llu is out of range", from,
                   (unsigned long long)m->blob_len);
  mscclppRegMem_t mem = NULL;
  pthread_mutex_lock(&x->lock);
  mscclppResult_t res = ext_import(x, m->blob, (size_t)m->blob_len, &mem);
  pthread_mutex_unlock(&x->lock);
  MPP_CHECK(res);
  int owner = -1;
  MPP_CHECK(mscclppRegMemInfo(mem, ptr, NULL, &owner));
  if (owner != from) return MPP_ERR(mscclppRemoteError, "switch channel: rank %d sent rank %d's buffer", from, owner);
  if (*ptr == NULL)
    return MPP_ERR(mscclppInvalidUsage, "switch channel: rank %d's buffer is not mapped here (members must be GPU ranks of "
                   "one host, or CPU ranks of one host with mscclppMemAlloc memory)", from);
  return mscclppSuccess;
}

mscclppResult_t mscclppSwitchChannelCreate(mscclppComm_t comm, const int* ranks, int nranks, mscclppRegMem_t local,
                                           mscclppSwitchChannel* chan) {
  err_clear();
  COMM_CHECK(comm);
  MPP_CHECK_ARG(local != NULL && chan != NULL, "mscclppSwitchChannelCreate: local or chan is NULL");
  int me = -1;
  MPP_CHECK(check_group(comm, ranks, nranks, &me));
  struct chan_ext* x = NULL;
  MPP_CHECK(chan_ext_get(comm, &x));
  uint32_t group = group_hash(ranks, nranks);
  struct switch_msg out, in;
  memset(&out, 0, sizeof(out));
  out.magic = SWITCH_MSG_MAGIC;
  out.group = group;
  out.rank = comm->rank;
  size_t len = sizeof(out.blob);
  out.status = (int32_t)mscclppRegMemSerialize(local, out.blob, &len);
  mscclppResult_t local_res = (mscclppResult_t)out.status;
  out.blob_len = len;
  int tag = boot_tag(BOOT_TAG_SWITCH, (int)group);
  /* Sends never wait for the receiver (its progress thread queues them): all sends, then all receives. */
  for (int i = 0; i < nranks; i++)
    if (i != me) MPP_CHECK(bootstrap_send(comm->boot, ranks[i], tag, &out, sizeof(out)));
  memset(chan, 0, sizeof(*chan));
  mscclppResult_t res = local_res;
  for (int i = 0; i < nranks; i++) {
    if (i == me) continue;
    MPP_CHECK(bootstrap_recv(comm->boot, ranks[i], tag, &in, sizeof(in)));
    if (res == mscclppSuccess) res = adopt(x, &in, ranks[i], group, &chan->peers[i]);
  }
  if (res != mscclppSuccess) return res;
  MPP_CHECK(mscclppRegMemInfo(local, &chan->peers[me], NULL, NULL));
  chan->nranks = nranks;
  chan->rank = me;
  LOG_DEBUG_(LOG_SUB_PROXY, "switch channel of %d members (emulated over peer memory), this rank is member %d", nranks, me);
  return mscclppSuccess;
}
