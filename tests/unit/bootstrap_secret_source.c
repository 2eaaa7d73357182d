/* bootstrap_secret_source.c - where a "host:port" rendezvous gets its secret (docs/security.md):
 * MSCCLPP_BOOTSTRAP_SECRET first, else a launcher's job id (PMIx namespace, Open MPI's HNP URI,
 * Slurm job and step, torchrun's run id other than "none"), else the public default with exactly
 * one "NO AUTHENTICATION" warning per process, from rank 0 only. Each case runs in a child
 * process: parameters are read once per process. */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bootstrap/internal.h"
#include "helpers.h"

static const char* vars[] = {"MSCCLPP_BOOTSTRAP_SECRET", "PMIX_NAMESPACE", "OMPI_MCA_orte_hnp_uri", "SLURM_JOB_ID",
                             "SLURM_STEP_ID", "TORCHELASTIC_RUN_ID"};

static int warn_lines;
static void hook(const char* line) {
  if (strstr(line, "NO AUTHENTICATION")) warn_lines++;
}

struct result {
  uint8_t secret[WIRE_SECRET_BYTES];
  int warnings;
};

/* In a child with exactly the given "NAME", "value" pairs set: the secret rank `rank` derives
 * (three times: the warning must come once) and how many warnings it logged. */
static struct result derive(int rank, const char* const* kv) {
  int p[2];
  CHECK(pipe(p) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) unsetenv(vars[i]);
    for (; *kv; kv += 2) setenv(kv[0], kv[1], 1);
    CHECK_OK(mscclppSetLogHandler(hook));
    struct result r;
    for (int i = 0; i < 3; i++) CHECK_OK(boot_address_secret(rank, r.secret));
    r.warnings = warn_lines;
    CHECK(write(p[1], &r, sizeof(r)) == (ssize_t)sizeof(r));
    _exit(0);
  }
  close(p[1]);
  struct result r;
  CHECK(read(p[0], &r, sizeof(r)) == (ssize_t)sizeof(r));
  close(p[0]);
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return r;
}

static int same(const struct result* a, const struct result* b) { return memcmp(a->secret, b->secret, WIRE_SECRET_BYTES) == 0; }

int main(void) {
  struct result pub;
  CHECK_OK(wire_secret_from_text(WIRE_DEFAULT_SECRET_TEXT, pub.secret));

  const char* none[] = {NULL};
  struct result r0 = derive(0, none), r1 = derive(1, none);
  CHECK(same(&r0, &pub) && same(&r1, &pub));
  CHECK_MSG(r0.warnings == 1, "rank 0 warned %d times, expected once", r0.warnings);
  CHECK_MSG(r1.warnings == 0, "rank 1 warned %d times, expected never", r1.warnings);
  const char* torch_none[] = {"TORCHELASTIC_RUN_ID", "none", NULL};
  struct result tn = derive(0, torch_none);
  CHECK(same(&tn, &pub) && tn.warnings == 1);

  const char* slurm_a[] = {"SLURM_JOB_ID", "4242", "SLURM_STEP_ID", "0", NULL};
  const char* slurm_b[] = {"SLURM_JOB_ID", "4242", "SLURM_STEP_ID", "1", NULL};
  struct result sa0 = derive(0, slurm_a), sa1 = derive(1, slurm_a), sb = derive(0, slurm_b);
  CHECK(!same(&sa0, &pub) && same(&sa0, &sa1) && !same(&sa0, &sb));
  CHECK(sa0.warnings == 0);

  const char* pmix[] = {"PMIX_NAMESPACE", "prterun-host-1234@1", NULL};
  const char* pmix_slurm[] = {"PMIX_NAMESPACE", "prterun-host-1234@1", "SLURM_JOB_ID", "4242", NULL};
  struct result px = derive(0, pmix), pxs = derive(2, pmix_slurm);
  CHECK(!same(&px, &pub) && same(&px, &pxs) && !same(&px, &sa0));
  const char* ompi[] = {"OMPI_MCA_orte_hnp_uri", "1234.0;tcp://10.0.0.1:4000", NULL};
  const char* torch[] = {"TORCHELASTIC_RUN_ID", "run-77", NULL};
  struct result om = derive(0, ompi), tr = derive(0, torch);
  CHECK(!same(&om, &pub) && !same(&tr, &pub) && !same(&om, &tr) && om.warnings == 0 && tr.warnings == 0);

  const char* mine[] = {"MSCCLPP_BOOTSTRAP_SECRET", "abc", "SLURM_JOB_ID", "4242", NULL};
  struct result ms = derive(0, mine), want;
  CHECK_OK(wire_secret_from_text("abc", want.secret));
  CHECK(same(&ms, &want) && ms.warnings == 0);
  printf("bootstrap_secret_source: ok\n");
  return 0;
}
