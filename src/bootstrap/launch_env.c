/* launch_env.c - rank, size, local rank and root address from what launchers put in the
 * environment. Launchers are tried in this order; the first whose rank variable is set wins, so an
 * explicit MSCCLPP_RANK beats torchrun, and torchrun or mpirun started under Slurm beat Slurm's own
 * variables. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bootstrap/bootstrap.h"
#include "util/err.h"
#include "util/param.h"

struct launcher {
  const char *name, *rank, *size, *local_rank;
};

static const struct launcher launchers[] = {
    {"mscclpp-run", "MSCCLPP_RANK", "MSCCLPP_WORLD_SIZE", "MSCCLPP_LOCAL_RANK"},
    {"torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"},
    {"MPICH/PMI", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"},
};

static const char* env(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : NULL;
}

/* Parses variable `name` as a decimal integer in [lo, hi]. */
static mscclppResult_t env_int(const char* name, long lo, long hi, int* out) {
  const char* v = env(name);
  if (!v) return MPP_ERR(mscclppInvalidUsage, "environment variable %s is not set", name);
  long x = 0;
  const char* p = v;
  for (; *p >= '0' && *p <= '9' && x <= hi; p++) x = x * 10 + (*p - '0');
  if (p == v || *p != '\0' || x < lo || x > hi)
    return MPP_ERR(mscclppInvalidUsage, "environment variable %s=\"%s\" is not an integer in [%ld, %ld]", name, v, lo,
                   hi);
  *out = (int)x;
  return mscclppSuccess;
}

static mscclppResult_t read_ranks(struct launch_env* e, const struct launcher** which) {
  const struct launcher* l = NULL;
  for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]) && !l; i++)
    if (env(launchers[i].rank)) l = &launchers[i];
  if (!l)
    return MPP_ERR(mscclppInvalidUsage,
                   "no launcher environment: set MSCCLPP_RANK/MSCCLPP_WORLD_SIZE or run under torchrun (RANK), "
                   "mpirun (OMPI_COMM_WORLD_RANK, PMI_RANK) or srun (SLURM_PROCID)");
  MPP_CHECK(env_int(l->size, 1, 1 << 20, &e->nranks));
  MPP_CHECK(env_int(l->rank, 0, e->nranks - 1, &e->rank));
  e->local_rank = -1;
  if (env(l->local_rank)) MPP_CHECK(env_int(l->local_rank, 0, e->nranks - 1, &e->local_rank));
  *which = l;
  return mscclppSuccess;
}

/* Whether MASTER_ADDR:MASTER_PORT is torchrun's store: torchrun started this process (its
 * launcher entry won) and says its agent serves the store, and MSCCLPP_MASTER_PORT does not name a
 * port of our own. */
static int torchrun_store(const struct launcher* l) {
  const char* agent = env("TORCHELASTIC_USE_AGENT_STORE");
  return l != NULL && strcmp(l->name, "torchrun") == 0 && agent != NULL &&
         (strcasecmp(agent, "true") == 0 || strcmp(agent, "1") == 0) && !env("MSCCLPP_MASTER_PORT");
}

/* The root: MSCCLPP_MASTER_ADDR (param) else MASTER_ADDR; MSCCLPP_MASTER_PORT else MASTER_PORT. */
static mscclppResult_t read_root(struct launch_env* e) {
  const char* addr_var = "MSCCLPP_MASTER_ADDR";
  const char* addr = param_str(PARAM_MASTER_ADDR);
  if (!*addr) addr_var = "MASTER_ADDR", addr = env("MASTER_ADDR");
  if (!addr) return MPP_ERR(mscclppInvalidUsage, "environment variable MSCCLPP_MASTER_ADDR (or MASTER_ADDR) is not set");
  const char* port_var = env("MSCCLPP_MASTER_PORT") ? "MSCCLPP_MASTER_PORT" : "MASTER_PORT";
  if (!env(port_var))
    return MPP_ERR(mscclppInvalidUsage, "environment variable MSCCLPP_MASTER_PORT (or MASTER_PORT) is not set");
  int port = 0;
  MPP_CHECK(env_int(port_var, 1, 65535, &port));
  int v6 = strchr(addr, ':') != NULL && addr[0] != '[';
  int n = snprintf(e->root, sizeof(e->root), v6 ? "[%s]:%d" : "%s:%d", addr, port);
  if (n < 0 || n >= (int)sizeof(e->root))
    return MPP_ERR(mscclppInvalidUsage, "environment variable %s is too long (%zu characters)", addr_var, strlen(addr));
  return mscclppSuccess;
}

mscclppResult_t launch_env_read(struct launch_env* e) {
  MPP_CHECK_ARG(e != NULL, "launch_env_read: env is NULL");
  memset(e, 0, sizeof(*e));
  e->local_rank = -1;
  const struct launcher* l = NULL;
  MPP_CHECK(read_ranks(e, &l));
  MPP_CHECK(read_root(e));
  e->via_store = torchrun_store(l);
  return mscclppSuccess;
}
