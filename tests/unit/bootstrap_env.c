/* bootstrap_env.c - launch_env_read: each launcher's variables, precedence between launchers,
 * the root address fallbacks, and InvalidUsage naming the variable when one is missing or
 * malformed. (MSCCLPP_MASTER_ADDR is a parameter read once per process; the mp tests cover it.) */
#include <string.h>

#include "bootstrap/bootstrap.h"
#include "helpers.h"

static const char* all_vars[] = {
    "MSCCLPP_RANK", "MSCCLPP_WORLD_SIZE", "MSCCLPP_LOCAL_RANK", "MSCCLPP_MASTER_ADDR", "MSCCLPP_MASTER_PORT",
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID",
    "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"};

static void clear_env(void) {
  for (size_t i = 0; i < sizeof(all_vars) / sizeof(all_vars[0]); i++) unsetenv(all_vars[i]);
}

/* Sets "NAME=value" pairs from a NULL-terminated list. */
static void set_env(const char* const* kv) {
  clear_env();
  for (; *kv; kv += 2) setenv(kv[0], kv[1], 1);
}

static void expect(const char* const* kv, int rank, int nranks, int local, const char* root) {
  set_env(kv);
  struct launch_env e;
  CHECK_OK(launch_env_read(&e));
  CHECK_MSG(e.rank == rank && e.nranks == nranks && e.local_rank == local && strcmp(e.root, root) == 0,
            "%s: got rank %d nranks %d local %d root %s", kv[0], e.rank, e.nranks, e.local_rank, e.root);
}

static void expect_fail(const char* const* kv, const char* var) {
  set_env(kv);
  struct launch_env e;
  CHECK_RES(launch_env_read(&e), mscclppInvalidUsage);
  CHECK_MSG(strstr(mscclppGetLastError(), var) != NULL, "error does not name %s: %s", var, mscclppGetLastError());
}

int main(void) {
  const char* torch[] = {"RANK", "3", "WORLD_SIZE", "8", "LOCAL_RANK", "1", "MASTER_ADDR", "10.0.0.1", "MASTER_PORT",
                         "29500", NULL};
  expect(torch, 3, 8, 1, "10.0.0.1:29500");
  const char* ompi[] = {"OMPI_COMM_WORLD_RANK", "0", "OMPI_COMM_WORLD_SIZE", "2", "OMPI_COMM_WORLD_LOCAL_RANK", "0",
                        "MASTER_ADDR", "host-a", "MASTER_PORT", "1", NULL};
  expect(ompi, 0, 2, 0, "host-a:1");
  const char* pmi[] = {"PMI_RANK", "5", "PMI_SIZE", "6", "MPI_LOCALRANKID", "2", "MASTER_ADDR", "::1",
                       "MSCCLPP_MASTER_PORT", "65535", NULL};
  expect(pmi, 5, 6, 2, "[::1]:65535");
  const char* pmi_nolocal[] = {"PMI_RANK", "5", "PMI_SIZE", "6", "MASTER_ADDR", "h", "MASTER_PORT", "7", NULL};
  expect(pmi_nolocal, 5, 6, -1, "h:7");
  const char* slurm[] = {"SLURM_PROCID", "1", "SLURM_NTASKS", "4", "SLURM_LOCALID", "1", "MASTER_ADDR", "[fe80::1]",
                         "MASTER_PORT", "99", NULL};
  expect(slurm, 1, 4, 1, "[fe80::1]:99");
  const char* mine[] = {"MSCCLPP_RANK", "1", "MSCCLPP_WORLD_SIZE", "2", "MSCCLPP_LOCAL_RANK", "1", "MASTER_ADDR",
                        "127.0.0.1", "MSCCLPP_MASTER_PORT", "4000", "MASTER_PORT", "5000", NULL};
  expect(mine, 1, 2, 1, "127.0.0.1:4000");
  /* Precedence: explicit MSCCLPP_* over torchrun over Open MPI over Slurm. */
  const char* both[] = {"MSCCLPP_RANK", "0", "MSCCLPP_WORLD_SIZE", "1", "RANK", "3", "WORLD_SIZE", "4",
                        "SLURM_PROCID", "9", "SLURM_NTASKS", "10", "MASTER_ADDR", "a", "MASTER_PORT", "2", NULL};
  expect(both, 0, 1, -1, "a:2");
  const char* torch_slurm[] = {"RANK", "3", "WORLD_SIZE", "4", "SLURM_PROCID", "9", "SLURM_NTASKS", "10",
                               "MASTER_ADDR", "a", "MASTER_PORT", "2", NULL};
  expect(torch_slurm, 3, 4, -1, "a:2");

  const char* none[] = {"MASTER_ADDR", "a", "MASTER_PORT", "2", NULL};
  expect_fail(none, "MSCCLPP_RANK");
  const char* bad_rank[] = {"RANK", "x3", "WORLD_SIZE", "4", "MASTER_ADDR", "a", "MASTER_PORT", "2", NULL};
  expect_fail(bad_rank, "RANK");
  const char* big_rank[] = {"RANK", "4", "WORLD_SIZE", "4", "MASTER_ADDR", "a", "MASTER_PORT", "2", NULL};
  expect_fail(big_rank, "RANK");
  const char* neg_size[] = {"PMI_RANK", "0", "PMI_SIZE", "-1", "MASTER_ADDR", "a", "MASTER_PORT", "2", NULL};
  expect_fail(neg_size, "PMI_SIZE");
  const char* no_size[] = {"OMPI_COMM_WORLD_RANK", "0", "MASTER_ADDR", "a", "MASTER_PORT", "2", NULL};
  expect_fail(no_size, "OMPI_COMM_WORLD_SIZE");
  const char* bad_local[] = {"SLURM_PROCID", "0", "SLURM_NTASKS", "2", "SLURM_LOCALID", "1.5", "MASTER_ADDR", "a",
                             "MASTER_PORT", "2", NULL};
  expect_fail(bad_local, "SLURM_LOCALID");
  const char* no_addr[] = {"RANK", "0", "WORLD_SIZE", "1", "MASTER_PORT", "2", NULL};
  expect_fail(no_addr, "MASTER_ADDR");
  const char* no_port[] = {"RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR", "a", NULL};
  expect_fail(no_port, "MASTER_PORT");
  const char* bad_port[] = {"RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR", "a", "MASTER_PORT", "65536", NULL};
  expect_fail(bad_port, "MASTER_PORT");
  const char* bad_mport[] = {"RANK", "0", "WORLD_SIZE", "1", "MASTER_ADDR", "a", "MSCCLPP_MASTER_PORT", "12ab", NULL};
  expect_fail(bad_mport, "MSCCLPP_MASTER_PORT");
  printf("bootstrap_env: ok\n");
  return 0;
}
