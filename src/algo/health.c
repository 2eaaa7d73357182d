/* health.c - whether a communicator can still run collectives on GPU ranks: no rank of it died (its
 * bootstrap's liveness saw one go), and no bounded device wait of an earlier call ran out (the
 * record the waits of channel/ext.h fill). Either means kernels of this and later calls would wait
 * for data that never comes, or run on with data that never came. */
#include "algo/algo.h"
#include "bootstrap/bootstrap.h"
#include "channel/ext.h"
#include "core/comm.h"
#include "util/err.h"

mscclppResult_t algo_health(struct mscclppComm* comm, const char* who) {
  if (comm->boot && bootstrap_faulted(comm->boot)) { /* no lock on the per-call path */
    mscclppResult_t res = bootstrap_health(comm->boot);
    if (res != mscclppSuccess) return MPP_ERR(res, "%s: %s", who, err_copy().text);
  }
  char what[320];
  if (!chan_ext_device_record(chan_ext_find(comm), what, sizeof(what))) return mscclppSuccess;
  return MPP_ERR(mscclppRemoteError, "%s: a device wait of an earlier call ran out (%s); the results of that call "
                 "and of any after it are not valid, and the communicator cannot run collectives any more "
                 "(mscclppCommGetDeviceError)", who, what[0] ? what : "no details");
}
