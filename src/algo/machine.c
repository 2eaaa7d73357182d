/* machine.c - the machine kind whose selection-table overlay (tuning/algo.<machine>.tsv) select.c
 * reads before the generic table: MSCCLPP_MACHINE when set, else a short name of the model of this
 * process's current GPU, else "" (no GPU: the generic table alone). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "algo/select.h"
#include "sys/gpu.h"
#include "util/err.h"
#include "util/param.h"

/* Words of a GPU name that say nothing about the model. */
static const char* const vendor_words[] = {"NVIDIA", "Tesla", "Quadro", "GeForce", "RTX"};

static int is_vendor_word(const char* w, size_t n) {
  for (size_t i = 0; i < sizeof(vendor_words) / sizeof(vendor_words[0]); i++)
    if (strlen(vendor_words[i]) == n && strncmp(w, vendor_words[i], n) == 0) return 1;
  return 0;
}

void algo_machine_from_gpu_name(const char* gpu, char* out, size_t len) {
  if (len == 0) return;
  out[0] = '\0';
  for (const char* p = gpu; *p != '\0';) {
    while (*p != '\0' && !isalnum((unsigned char)*p)) p++;
    size_t n = 0;
    while (isalnum((unsigned char)p[n])) n++;
    if (n == 0) return;
    if (!is_vendor_word(p, n)) {
      size_t k = 0;
      for (; k < n && k + 1 < len; k++) out[k] = (char)tolower((unsigned char)p[k]);
      out[k] = '\0';
      return;
    }
    p += n;
  }
}

mscclppResult_t algo_machine_check(const char* name) {
  size_t n = strlen(name);
  if (n > ALGO_MACHINE_MAX) return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_MACHINE: '%s' is longer than %d characters", name, ALGO_MACHINE_MAX);
  for (size_t i = 0; i < n; i++)
    if (!islower((unsigned char)name[i]) && !isdigit((unsigned char)name[i]) && name[i] != '-' && name[i] != '_')
      return MPP_ERR(mscclppInvalidArgument, "MSCCLPP_MACHINE: '%s' may hold only a-z, 0-9, '-' and '_' (it names "
                     "the file tuning/algo.<machine>.tsv)", name);
  return mscclppSuccess;
}

mscclppResult_t algo_machine(char out[ALGO_MACHINE_MAX + 1]) {
  const char* want = param_str(PARAM_MACHINE);
  if (want[0] != '\0') {
    MPP_CHECK(algo_machine_check(want));
    snprintf(out, ALGO_MACHINE_MAX + 1, "%s", want);
    return mscclppSuccess;
  }
  out[0] = '\0';
  int dev = -1;
  char name[256];
  if (gpu_count() > 0 && gpu_current_device(&dev) == mscclppSuccess && gpu_name(dev, name, sizeof(name)) == mscclppSuccess)
    algo_machine_from_gpu_name(name, out, ALGO_MACHINE_MAX + 1);
  err_clear(); /* no GPU is no error here */
  return mscclppSuccess;
}
