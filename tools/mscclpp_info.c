/* mscclpp-info: prints the library version, how it was built, every MSCCLPP_* parameter with its
 * value, the GPUs this process sees, which transports this machine supports, the built-in
 * algorithms and which selection table (algo.tsv) the collectives would use. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

#include <mscclpp/mscclpp.h>

#include "algo/algo.h"
#include "algo/select.h"
#include "sys/cudawrap.h"
#include "sys/gpu.h"
#include "transport/net.h"
#include "util/param.h"

/* Every parameter of params.def (the logger's LOG_* ones included): its variable, the value in
 * effect, whether the environment set it, the default and the choices, then what it does. */
static void print_params(void) {
  printf("\nParameters (environment variables; docs/parameters.md has the same table):\n");
  for (int i = 0; i < PARAM_COUNT; i++) {
    char value[128], def[128], var[96];
    param_value_text(i, value, sizeof(value));
    param_default_text(i, def, sizeof(def));
    snprintf(var, sizeof(var), "MSCCLPP_%s", param_name(i));
    printf("  %-32s = %s%s  (%s, default %s%s%s)\n", var, value[0] ? value : "\"\"", param_is_set(i) ? " (set)" : "",
           param_kind(i), def[0] ? def : "\"\"", param_choices(i) ? "; one of " : "",
           param_choices(i) ? param_choices(i) : "");
    printf("      %s\n", param_help(i));
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

static const struct cli_opt opts[] = {
    {"--algorithms", NULL, "list only the built-in algorithms: name, collective, rank kind (cpu|gpu) and\n"
                           "\"captured-only\" for those used only by calls captured in a CUDA graph"},
    {"--params", NULL, "list only the MSCCLPP_* parameters (value, default, choices, what it does)"},
    {"-h, --help", NULL, "this help"},
    {NULL, NULL, NULL}};

static const struct cli_help help = {
    "mscclpp-info", "mscclpp-info [--algorithms | --params]",
    "Prints the library version and build, every MSCCLPP_* environment parameter with its value in\n"
    "this environment, the GPUs this process sees, the transports of this machine and the built-in\n"
    "algorithms.",
    opts, NULL};

int main(int argc, char** argv) {
  cli_quiet_library_errors();
  if (cli_wants_help(argc, argv)) return cli_print_help(&help), 0;
  if (argc > 2) return cli_usage_error("mscclpp-info", "one option at most, got %d arguments", argc - 1);
  if (argc == 2 && strcmp(argv[1], "--algorithms") == 0) {
    print_algorithms();
    return 0;
  }
  if (argc == 2 && strcmp(argv[1], "--params") == 0) {
    print_params();
    return 0;
  }
  if (argc == 2)
    return cli_usage_error("mscclpp-info", "%s '%s'", argv[1][0] == '-' ? "unknown option" : "unexpected argument", argv[1]);
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
  char net_why[512];
  int net_ok = net_probe(net_why, sizeof(net_why));
  printf("  net      %s (%s)\n", net_ok ? "yes" : "no", net_why); /* libfabric; MSCCLPP_NET_TRANSPORT=on uses it */
  printf("  cuda-ipc %s\n", ngpus > 0 ? "yes (GPU memory between processes of this host)" : "no (no GPU)");
  printf("  ib       no (not built yet)\n");
  printf("\nBuilt-in algorithms (name, collective, rank kind):\n");
  print_algorithms();
  /* Loads the selection table as the first collective would (src/algo/select.c says where from). */
  (void)algo_forced(ALGO_COLL_ALLREDUCE, mscclppRankCpu);
  printf("\nSelection table: %s\n", algo_table_source());
  return 0;
}
