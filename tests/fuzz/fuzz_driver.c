/* fuzz_driver.c - runs a libFuzzer-style target without libFuzzer: feeds it the target's seed
 * inputs (from its optional fuzz_target_seeds), mutations of them (bit flips, interesting bytes,
 * truncation, extension, splices) and random bytes for a time budget. Any target can link it.
 *
 *   TARGET [SECONDS (default 3)] [RANDOM_SEED (default: from the clock, printed)]
 *
 * A crash or abort in the target fails the test; the last input is written to
 * fuzz-crash-input.bin in the working directory first when it aborts. */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
/* Optional: the target hands its valid example inputs to add. */
void fuzz_target_seeds(void (*add)(const void* data, size_t size)) __attribute__((weak));

#define MAX_INPUT 1024
#define MAX_SEEDS 64

static uint8_t seeds[MAX_SEEDS][MAX_INPUT];
static size_t seed_len[MAX_SEEDS];
static int nseeds;
static uint8_t input[MAX_INPUT];
static size_t input_len;
static uint64_t rng;

static uint64_t next_rand(void) { /* xorshift64* */
  rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static void on_abort(int sig) {
  FILE* f = fopen("fuzz-crash-input.bin", "wb");
  if (f) fwrite(input, 1, input_len, f), fclose(f);
  signal(sig, SIG_DFL);
  raise(sig);
}

static void add_seed(const void* p, size_t n) {
  if (nseeds == MAX_SEEDS || n > MAX_INPUT) return;
  memcpy(seeds[nseeds], p, n);
  seed_len[nseeds++] = n;
}

/* Replaces input with a mutation of a seed (or random bytes). */
static void mutate(void) {
  int s = (int)(next_rand() % (uint64_t)nseeds);
  memcpy(input, seeds[s], seed_len[s]);
  input_len = seed_len[s];
  int rounds = 1 + (int)(next_rand() % 4);
  for (int r = 0; r < rounds; r++) {
    size_t pos = input_len ? (size_t)(next_rand() % input_len) : 0;
    static const uint8_t interesting[] = {0, 1, 2, 3, 4, 6, 0x7f, 0x80, 0xfe, 0xff};
    switch (next_rand() % 7) {
      case 0: if (input_len) input[pos] ^= (uint8_t)(1u << (next_rand() % 8)); break;
      case 1: if (input_len) input[pos] = interesting[next_rand() % sizeof(interesting)]; break;
      case 2: if (input_len) input[pos] = (uint8_t)next_rand(); break;
      case 3: input_len = input_len ? (size_t)(next_rand() % input_len) : 0; break; /* truncate */
      case 4: { /* extend */
        size_t add = 1 + (size_t)(next_rand() % 64);
        if (input_len + add > MAX_INPUT) add = MAX_INPUT - input_len;
        for (size_t i = 0; i < add; i++) input[input_len + i] = (uint8_t)next_rand();
        input_len += add;
        break;
      }
      case 5: { /* splice another seed's bytes in */
        int o = (int)(next_rand() % (uint64_t)nseeds);
        size_t n = seed_len[o] < input_len - pos ? seed_len[o] : input_len - pos;
        memcpy(input + pos, seeds[o], n);
        break;
      }
      default: /* random bytes of a random length */
        input_len = (size_t)(next_rand() % 300);
        for (size_t i = 0; i < input_len; i++) input[i] = (uint8_t)next_rand();
    }
  }
}

int main(int argc, char** argv) {
  double budget = argc > 1 ? atof(argv[1]) : 3.0;
  rng = argc > 2 ? strtoull(argv[2], NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
  if (rng == 0) rng = 1;
  printf("fuzz driver: seed %llu, %.1f s\n", (unsigned long long)rng, budget);
  fflush(stdout);
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  signal(SIGABRT, on_abort);
  signal(SIGSEGV, on_abort);
  if (fuzz_target_seeds) fuzz_target_seeds(add_seed);
  if (nseeds == 0) add_seed("", 0);
  for (int s = 0; s < nseeds; s++) {
    memcpy(input, seeds[s], seed_len[s]);
    input_len = seed_len[s];
    LLVMFuzzerTestOneInput(input, input_len);
  }
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  unsigned long long runs = 0;
  for (;; runs++) {
    if ((runs & 1023) == 0) {
      clock_gettime(CLOCK_MONOTONIC, &t);
      if ((double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) * 1e-9 >= budget) break;
    }
    mutate();
    LLVMFuzzerTestOneInput(input, input_len);
  }
  printf("fuzz driver: %llu inputs, no failures\n", runs);
  return 0;
}
