/* nccl_consumer.c - a program built against an installed libmscclpp_nccl.so through <nccl.h>
 * (tests/install/install_test.sh): the library's version must be the header's. Runs with
 * LD_LIBRARY_PATH=<prefix>/lib/nccl (the program needs libnccl.so.2, the library's soname). */
#include <stdio.h>

#include <nccl.h>

int main(void) {
  int version = 0;
  ncclResult_t r = ncclGetVersion(&version);
  if (r != ncclSuccess || version != NCCL_VERSION_CODE) {
    fprintf(stderr, "nccl_consumer: ncclGetVersion: %s, %d (header %d)\n", ncclGetErrorString(r), version,
            NCCL_VERSION_CODE);
    return 1;
  }
  printf("nccl_consumer: OK (NCCL API %d)\n", version);
  return 0;
}
