/* consumer.c - a program built against an installed mscclpp (tests/install/install_test.sh builds
 * it with pkg-config and with find_package, shared and static). It uses only the public API: the
 * header's version against the library's, then one allreduce on a 1-rank CPU communicator (the
 * first collective loads the selection table; the test reads which file from the library's log).
 * Prints "consumer: OK" on success. */
#include <stdio.h>

#include <mscclpp/mscclpp.h>

#define OK(call)                                                                                   \
  do {                                                                                             \
    mscclppResult_t r_ = (call);                                                                   \
    if (r_ != mscclppSuccess) {                                                                    \
      fprintf(stderr, "consumer: %s: %s: %s\n", #call, mscclppGetErrorString(r_), mscclppGetLastError()); \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

int main(void) {
  int version = 0;
  OK(mscclppGetVersion(&version));
  if (version != MSCCLPP_VERSION) {
    fprintf(stderr, "consumer: library version %d, header %d\n", version, MSCCLPP_VERSION);
    return 1;
  }
  mscclppUniqueId id;
  OK(mscclppGetUniqueId(&id));
  mscclppConfig_t config = MSCCLPP_CONFIG_INITIALIZER;
  config.rankKind = mscclppRankCpu;
  mscclppComm_t comm;
  OK(mscclppCommInitRankConfig(&comm, 1, id, 0, &config));
  float in[4] = {1, 2, 3, 4}, out[4] = {0};
  OK(mscclppAllReduce(in, out, 4, mscclppFloat32, mscclppSum, comm, NULL));
  OK(mscclppCommDestroy(comm));
  for (int i = 0; i < 4; i++)
    if (out[i] != in[i]) {
      fprintf(stderr, "consumer: out[%d] = %g, want %g\n", i, (double)out[i], (double)in[i]);
      return 1;
    }
  printf("consumer: OK (mscclpp %d)\n", version);
  return 0;
}
