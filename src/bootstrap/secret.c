/* secret.c - where the secret of a "host:port" rendezvous comes from (docs/security.md), and the
 * keys other layers derive from a bootstrap's secret.
 *
 * In order: MSCCLPP_BOOTSTRAP_SECRET (mscclpp-run sets a random one per job); else a job id that
 * the launcher gives every rank of the job and only it (Open MPI / PMIx namespace, Slurm job and
 * step, torchrun's run id); else a fixed public text, which authenticates nothing and is said so
 * once, loudly, by rank 0. Every source goes through HKDF-SHA256 (wire_secret_from_text). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bootstrap/internal.h"
#include "util/auth.h"
#include "util/bytes.h"
#include "util/err.h"
#include "util/log.h"
#include "util/param.h"

static const char* env(const char* name) {
  const char* v = getenv(name);
  return v && *v ? v : NULL;
}

/* Writes "<launcher>:<job id>" into out from the first launcher whose job id is set; 0 when none. */
static int launcher_job_id(char* out, size_t len, const char** source) {
  const char* v;
  if ((v = env("PMIX_NAMESPACE"))) {
    *source = "PMIX_NAMESPACE";
    snprintf(out, len, "pmix:%s", v);
  } else if ((v = env("OMPI_MCA_orte_hnp_uri"))) {
    *source = "OMPI_MCA_orte_hnp_uri";
    snprintf(out, len, "ompi:%s", v);
  } else if ((v = env("SLURM_JOB_ID"))) {
    const char* step = env("SLURM_STEP_ID");
    *source = "SLURM_JOB_ID and SLURM_STEP_ID";
    snprintf(out, len, "slurm:%s.%s", v, step ? step : "-");
  } else if ((v = env("TORCHELASTIC_RUN_ID")) && strcmp(v, "none") != 0) {
    *source = "TORCHELASTIC_RUN_ID";
    snprintf(out, len, "torchrun:%s", v);
  } else {
    return 0;
  }
  return 1;
}

static pthread_once_t warn_once = PTHREAD_ONCE_INIT;
static void warn_public(void) {
  log_msg(LOG_WARN, LOG_SUB_BOOTSTRAP,
          "bootstrap: NO AUTHENTICATION: neither MSCCLPP_BOOTSTRAP_SECRET nor a launcher's job id is set, so this "
          "job's \"host:port\" rendezvous uses the public default secret and any local or network process can join "
          "it. Set MSCCLPP_BOOTSTRAP_SECRET to the same random text on every rank (docs/security.md)");
}

mscclppResult_t boot_address_secret(int rank, uint8_t secret[WIRE_SECRET_BYTES]) {
  const char* text = param_str(PARAM_BOOTSTRAP_SECRET);
  char job[512];
  const char* source = "MSCCLPP_BOOTSTRAP_SECRET";
  if (!*text && launcher_job_id(job, sizeof(job), &source)) text = job;
  if (!*text) {
    if (rank == 0) pthread_once(&warn_once, warn_public);
    return wire_secret_from_text(WIRE_DEFAULT_SECRET_TEXT, secret);
  }
  if (rank == 0) LOG_INFO_(LOG_SUB_BOOTSTRAP, "bootstrap: the rendezvous secret is derived from %s", source);
  return wire_secret_from_text(text, secret);
}

mscclppResult_t bootstrap_derive_key(const struct bootstrap* b, const char* purpose, uint64_t context,
                                     uint8_t key[BOOTSTRAP_KEY_BYTES]) {
  uint8_t info[8];
  le_put64(info, context);
  return auth_hkdf(b->secret, WIRE_SECRET_BYTES, purpose, info, sizeof(info), key, BOOTSTRAP_KEY_BYTES);
}
