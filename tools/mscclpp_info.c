/* mscclpp-info: prints the library version, how it was built, every MSCCLPP_* parameter with its
 * value, the GPUs this process sees, which transports this machine supports, the built-in
 * algorithms and which selection table (algo.tsv) the collectives would use. */
#include <stdio.h>
#include <string.h>

#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/select.h"
#include "sys/cudawrap.h"
#include "sys/gpu.h"
#include "util/param.h"

static void print_params(void) {
  printf("\nParameters (environment MSCCLPP_<NAME>):\n");
  for (int i = 0; i < PARAM_COUNT; i++) {
    char value[128];
    param_value_text(i, value, sizeof(value));
    printf("  %-20s = %-12s%s  %s\n", param_name(i), value[0] ? value : "\"\"", param_is_set(i) ? " (set)" : "",
           param_help(i));
  }
}

#if MSCCLPP_HAVE_CUDA
/* One line per device, then which pairs can reach each other's memory directly. */
static void print_gpus(int n) {
  for (int d = 0; d < n; d++) {
    struct cudaDeviceProp prop;
    char bus[32] = "?";
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) continue;
    cudaDeviceGetPCIBusId(bus, sizeof(bus), d);
    printf("  GPU %d: %s, sm_%d%d, %d SMs, %.1f GiB, bus %s\n", d, prop.name, prop.major, prop.minor,
           prop.multiProcessorCount, (double)prop.totalGlobalMem / (1 << 30), bus);
  }
  if (n < 2) return;
  printf("  peer access (row can access column):\n");
  for (int a = 0; a < n; a++) {
    printf("    %d:", a);
    for (int b = 0; b < n; b++) {
      int ok = 0;
      if (a != b) cudaDeviceCanAccessPeer(&ok, a, b);
      printf(" %s", a == b ? "-" : (ok ? "Y" : "n"));
    }
    printf("\n");
  }
}
#endif

/* One line per built-in algorithm: name, collective, rank kind, and "captured-only" for the ones
 * the table gives only calls captured into a CUDA graph (what MSCCLPP_ALGO and tuning/algo.tsv
 * name; tools/mscclpp_tune.py reads this list). */
static void print_algorithms(void) {
  int n = 0;
  const struct algo_desc* d = algo_registry(&n);
  for (int i = 0; i < n; i++)
    printf("  %-28s %-14s %s%s\n", d[i].name, algo_coll_name(d[i].coll), d[i].kind == mscclppRankGpu ? "gpu" : "cpu",
           d[i].graph_only ? " captured-only" : "");
}

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "--algorithms") == 0) {
    print_algorithms();
    return 0;
  }
  if (argc > 1) {
    fprintf(stderr, "usage: mscclpp-info [--algorithms]\n");
    return 2;
  }
  int version = 0;
  mscclppGetVersion(&version);
  printf("mscclpp %d.%d.%d (version code %d)\n", version / 10000, (version / 100) % 100, version % 100, version);
#if MSCCLPP_HAVE_CUDA
  int rt = 0;
  cudaRuntimeGetVersion(&rt);
  printf("built with CUDA runtime %d.%d (static); driver API through entry points\n", rt / 1000, (rt % 1000) / 10);
#else
  printf("built without CUDA (CPU ranks only)\n");
#endif
  print_params();
  int ngpus = gpu_count();
  printf("\nGPUs: %d visible%s\n", ngpus, ngpus ? "" : " (no CUDA driver or device: CPU ranks only)");
#if MSCCLPP_HAVE_CUDA
  if (ngpus > 0) print_gpus(ngpus);
#endif
  printf("\nTransports on this machine:\n");
  printf("  shm      yes (host memory shared between processes of this host)\n");
  printf("  tcp      yes (host memory across hosts)\n");
  printf("  cuda-ipc %s\n", ngpus > 0 ? "yes (GPU memory between processes of this host)" : "no (no GPU)");
  printf("  ib       no (not built yet)\n");
  printf("\nBuilt-in algorithms (name, collective, rank kind):\n");
  print_algorithms();
  /* Loads the selection table as the first collective would (src/algo/select.c says where from). */
  (void)algo_forced(ALGO_COLL_ALLREDUCE, mscclppRankCpu);
  printf("\nSelection table: %s\n", algo_table_source());
  return 0;
}
