/* launch_store.c - mscclppCommInitFromEnv's unique id through torchrun's store.
 *
 * torchrun's agent already listens on MASTER_PORT (its TCPStore), so rank 0 cannot start the
 * bootstrap root there. Instead rank 0 starts a root on a free port of its host, exactly as
 * mscclppGetUniqueId does (with a random secret), and puts the id in the store under a key naming
 * the job, its restart and the how-many-th init from the environment this is; the other ranks wait
 * for that key. When rank 0 cannot start its root, it stores the reason instead, so every rank fails
 * at once with it rather than at the bootstrap timeout. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/tcpstore.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"
#include "util/socket.h"
#include "util/timeutil.h"

enum { VALUE_ID = 'I', VALUE_ERROR = 'E' }; /* first byte of a stored value */
#define VALUE_CAP 1024

static atomic_int inits_from_env; /* this process's inits through a store so far */

static void store_key(char* key, size_t len, int seq) {
  const char* run = getenv("TORCHELASTIC_RUN_ID");
  const char* restart = getenv("TORCHELASTIC_RESTART_COUNT");
  snprintf(key, len, "mscclpp/init_from_env/%.64s/%.16s/%d", run && *run ? run : "-",
           restart && *restart ? restart : "0", seq);
}

/* Rank 0: a root of its own, and its id (or why there is none) in the store. */
static mscclppResult_t publish(int fd, const char* key, mscclppUniqueId* id, uint64_t deadline) {
  uint8_t value[VALUE_CAP];
  mscclppResult_t made = bootstrap_unique_id(id);
  size_t len;
  if (made == mscclppSuccess) {
    value[0] = VALUE_ID;
    memcpy(value + 1, id, sizeof(*id));
    len = 1 + sizeof(*id);
  } else {
    value[0] = VALUE_ERROR;
    len = 1 + (size_t)snprintf((char*)value + 1, sizeof(value) - 1, "%s", err_last());
    if (len > sizeof(value) - 1) len = sizeof(value) - 1;
  }
  MPP_CHECK(tcpstore_set(fd, key, value, len, deadline));
  return made;
}

/* The other ranks: rank 0's id, or its failure as theirs. */
static mscclppResult_t fetch(int fd, const char* key, mscclppUniqueId* id, uint64_t deadline) {
  uint8_t value[VALUE_CAP];
  size_t len = 0;
  MPP_CHECK(tcpstore_wait_get(fd, key, value, sizeof(value) - 1, &len, deadline));
  if (len >= 1 && value[0] == VALUE_ERROR) {
    value[len] = '\0';
    return MPP_ERR(mscclppRemoteError, "rank 0 could not start the bootstrap root: %s", (const char*)value + 1);
  }
  if (len != 1 + sizeof(*id) || value[0] != VALUE_ID)
    return MPP_ERR(mscclppRemoteError, "launcher's store: \"%s\" holds %zu bytes that are not a unique id", key, len);
  memcpy(id, value + 1, sizeof(*id));
  return mscclppSuccess;
}

mscclppResult_t launch_store_id(const struct launch_env* env, mscclppUniqueId* id) {
  MPP_CHECK_ARG(env != NULL && id != NULL && env->via_store, "launch_store_id: no store to use");
  char key[160];
  store_key(key, sizeof(key), atomic_fetch_add(&inits_from_env, 1));
  uint64_t deadline = time_deadline_ms(param_int(PARAM_BOOTSTRAP_TIMEOUT) * 1000);
  int fd = -1;
  mscclppResult_t res = tcpstore_connect(env->root, deadline, &fd);
  if (res != mscclppSuccess) {
    char why[512];
    snprintf(why, sizeof(why), "%s", err_last());
    return MPP_ERR(res, "connecting to torchrun's store at %s (MASTER_ADDR:MASTER_PORT): %s", env->root, why);
  }
  LOG_INFO_(LOG_SUB_BOOTSTRAP, "init from env: rank %d %s the unique id through torchrun's store at %s, key %s",
            env->rank, env->rank == 0 ? "publishes" : "reads", env->root, key);
  res = env->rank == 0 ? publish(fd, key, id, deadline) : fetch(fd, key, id, deadline);
  sock_close(&fd);
  return res;
}
