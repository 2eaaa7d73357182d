/* health.c - whether a communicator can still run collectives on GPU ranks: no rank of it died (its
 * bootstrap's liveness saw one go), and no bounded device wait of an earlier call ran out (the
 * record the waits of channel/ext.h fill). Either means kernels of this and later calls would wait
 * for data that never comes, or run on with data that never came. */
#include <mscclpp/wait.h>

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
  struct chan_ext* x = chan_ext_find(comm);
  /* Acquire: pairs with the failing wait's release store of flag = 1; the fields are complete. */
  if (x == NULL || x->rec_host == NULL || __atomic_load_n(&x->rec_host->flag, __ATOMIC_ACQUIRE) != 1)
    return mscclppSuccess;
  mscclppDeviceError e = *(volatile mscclppDeviceError*)x->rec_host;
  e.flag = 1;
  char what[320];
  if (mscclppDeviceErrorString(&e, what, sizeof(what)) != mscclppSuccess) what[0] = '\0';
  return MPP_ERR(mscclppRemoteError, "%s: a device wait of an earlier call ran out (%s); the results of that call "
                 "and of any after it are not valid, and the communicator cannot run collectives any more "
                 "(mscclppCommGetDeviceError)", who, what[0] ? what : "no details");
}
