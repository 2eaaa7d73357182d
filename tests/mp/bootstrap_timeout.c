/* bootstrap_timeout.c - a rank that never shows up: every other rank's init returns Timeout after
 * about the configured bound (not much earlier, not much later).
 *
 *   bootstrap_timeout uid MS     ids from mscclppGetUniqueId, bound from mscclppConfig_t (MS ms)
 *   bootstrap_timeout ipport S   "host:port", bound from mscclppSetBootstrapConnTimeout (S s) */
#include "bootstrap_mp.h"

int main(int argc, char** argv) {
  CHECK_MSG(argc == 3, "usage: %s uid MS | ipport S", argv[0]);
  int rank = mp_env_int("MSCCLPP_RANK"), nranks = mp_env_int("MSCCLPP_WORLD_SIZE");
  CHECK_MSG(nranks >= 2, "needs 2 ranks or more");
  if (rank == nranks - 1) return 0; /* the rank that never comes */
  int uid = strcmp(argv[1], "uid") == 0;
  double bound = uid ? atoi(argv[2]) / 1000.0 : atoi(argv[2]);
  mscclppComm_t comm = NULL;
  mscclppResult_t r;
  double t0;
  if (uid) {
    mscclppUniqueId id;
    mp_share_id(rank, &id);
    mscclppConfig_t cfg = MSCCLPP_CONFIG_INITIALIZER;
    cfg.bootstrapTimeoutMs = atoi(argv[2]);
    t0 = mp_now();
    r = mscclppCommInitRankConfig(&comm, nranks, id, rank, &cfg);
  } else {
    char root[300];
    mp_root(root, sizeof(root));
    CHECK_OK(mscclppSetBootstrapConnTimeout(atoi(argv[2])));
    t0 = mp_now();
    r = mscclppCommInitRank(&comm, nranks, root, rank);
  }
  double dt = mp_now() - t0;
  if (uid) mp_unshare_id(rank);
  /* Rank 0's failed init stops its root at once (its port free for a retry): a rank whose own
   * deadline comes a moment after rank 0's then sees the root go instead (RemoteError naming it). */
  int root_gone = rank != 0 && r == mscclppRemoteError && strstr(mscclppGetLastError(), "root") != NULL;
  CHECK_MSG(r == mscclppTimeout || root_gone, "rank %d: init returned %d (%s), expected Timeout: %s", rank, (int)r,
            mscclppGetErrorString(r), mscclppGetLastError());
  CHECK(comm == NULL);
  CHECK_MSG(dt > bound * 0.9 && dt < bound + 5, "rank %d: Timeout after %.2f s, the bound is %.2f s", rank, dt, bound);
  CHECK_MSG(root_gone || strstr(mscclppGetLastError(), "table") != NULL,
            "rank %d: message does not say what it waited for: %s", rank, mscclppGetLastError());
  /* The root is a thread of rank 0's process: leaving at once would close the connections of
   * ranks that started a moment later, turning their Timeout into a RemoteError. */
  if (rank == 0) usleep(2000000);
  return 0;
}
