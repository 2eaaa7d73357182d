/* bootstrap_seal.c - the sealed records of util/seal.h: a roundtrip (in place and not, empty and
 * large), and every way a record can go wrong is an error naming the peer, never wrong data:
 * a flipped byte of ciphertext, counter, tag or associated data; a replayed, dropped or reordered
 * record; a record sealed under another connection's key or the other direction's; and a context
 * that failed once stays failed. */
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "util/err.h"
#include "util/seal.h"

static const uint8_t KEY[SEAL_KEY_BYTES] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16,
                                            17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
static const uint8_t HELLO[64] = {'h', 'e', 'l', 'l', 'o'};
static const uint8_t NONCE[16] = {9, 9, 9};
static const uint8_t AAD[16] = {'M', 'P', 'B', 'F', 7};

/* A client's tx and the server's rx of one connection. */
static void pair(struct seal* tx, struct seal* rx) {
  CHECK_OK(seal_derive(KEY, HELLO, sizeof(HELLO), NONCE, sizeof(NONCE), SEAL_CLIENT, tx, NULL));
  CHECK_OK(seal_derive(KEY, HELLO, sizeof(HELLO), NONCE, sizeof(NONCE), SEAL_SERVER, NULL, rx));
}

/* Expects opening rec (len plaintext bytes) to fail with RemoteError naming "rank 5" and `what`. */
static void expect_refused(struct seal* rx, const uint8_t* aad, const uint8_t* rec, size_t len, const char* what) {
  uint8_t* out = malloc(len + 1);
  CHECK(out);
  CHECK_RES(seal_open(rx, aad, 16, rec, len, out, "rank 5 at 10.0.0.5:1234"), mscclppRemoteError);
  CHECK_MSG(strstr(err_last(), "rank 5") && strstr(err_last(), what), "error does not say '%s' naming rank 5: %s",
            what, err_last());
  free(out);
}

static void roundtrip(void) {
  struct seal tx = {.counter = 0}, rx = {.counter = 0};
  pair(&tx, &rx);
  size_t sizes[] = {0, 1, 32, 4096, 3u << 20};
  for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
    size_t n = sizes[k];
    uint8_t *in = malloc(n + 1), *rec = malloc(n + SEAL_OVERHEAD), *out = malloc(n + 1);
    CHECK(in && rec && out);
    for (size_t i = 0; i < n; i++) in[i] = (uint8_t)(i * 31 + k);
    CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), n ? in : NULL, n, rec));
    if (n >= 32) CHECK_MSG(memcmp(rec, in, 32) != 0, "the record carries the plaintext");
    CHECK_OK(seal_open(&rx, AAD, sizeof(AAD), rec, n, out, "rank 5"));
    CHECK(n == 0 || memcmp(in, out, n) == 0);
    /* in place both ways */
    memcpy(rec, in, n);
    CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), rec, n, rec));
    CHECK_OK(seal_open(&rx, AAD, sizeof(AAD), rec, n, rec, "rank 5"));
    CHECK(n == 0 || memcmp(in, rec, n) == 0);
    free(in), free(rec), free(out);
  }
  /* the same plaintext twice gives different records (the counter is the nonce) */
  uint8_t a[32 + SEAL_OVERHEAD], b[32 + SEAL_OVERHEAD], p[32] = {0};
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 32, a));
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 32, b));
  CHECK(memcmp(a, b, 32) != 0);
  seal_clear(&tx), seal_clear(&rx);
}

static void tampered(void) {
  uint8_t p[40], rec[40 + SEAL_OVERHEAD];
  memset(p, 0x5a, sizeof(p));
  int spots[] = {0, 39, 40, 47, 48, 40 + SEAL_OVERHEAD - 1}; /* ciphertext, counter, tag */
  for (size_t k = 0; k < sizeof(spots) / sizeof(spots[0]); k++) {
    struct seal tx = {.counter = 0}, rx = {.counter = 0};
    pair(&tx, &rx);
    CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, sizeof(p), rec));
    rec[spots[k]] ^= 0x01;
    expect_refused(&rx, AAD, rec, sizeof(p), spots[k] >= 40 && spots[k] < 48 ? "due" : "failed authentication");
    rec[spots[k]] ^= 0x01; /* the genuine record after a failure: the connection is over */
    expect_refused(&rx, AAD, rec, sizeof(p), "unusable");
    seal_clear(&tx), seal_clear(&rx);
  }
  struct seal tx = {.counter = 0}, rx = {.counter = 0};
  pair(&tx, &rx);
  uint8_t aad2[16];
  memcpy(aad2, AAD, sizeof(aad2));
  aad2[4] ^= 1; /* the clear header says another tag */
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, sizeof(p), rec));
  expect_refused(&rx, aad2, rec, sizeof(p), "failed authentication");
  seal_clear(&tx), seal_clear(&rx);
}

static void replayed_reordered(void) {
  struct seal tx = {.counter = 0}, rx = {.counter = 0};
  pair(&tx, &rx);
  uint8_t p[8] = {1}, r0[8 + SEAL_OVERHEAD], r1[8 + SEAL_OVERHEAD], out[8];
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 8, r0));
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 8, r1));
  CHECK_OK(seal_open(&rx, AAD, sizeof(AAD), r0, 8, out, "rank 5"));
  expect_refused(&rx, AAD, r0, 8, "replayed"); /* r0 again */
  pair(&tx, &rx);
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 8, r0));
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 8, r1));
  expect_refused(&rx, AAD, r1, 8, "reordered"); /* r1 before r0 */
  /* a counter rewritten to the due number does not help: the tag covers it */
  pair(&tx, &rx);
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 8, r0));
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 8, r1));
  memset(r1 + 8, 0, SEAL_COUNTER_BYTES);
  expect_refused(&rx, AAD, r1, 8, "failed authentication");
  seal_clear(&tx), seal_clear(&rx);
}

static void wrong_key(void) {
  uint8_t p[16] = {3}, rec[16 + SEAL_OVERHEAD];
  struct seal tx = {.counter = 0}, rx = {.counter = 0}, other_rx = {.counter = 0}, back_rx = {.counter = 0},
              self_rx = {.counter = 0};
  pair(&tx, &rx);
  CHECK_OK(seal_record(&tx, AAD, sizeof(AAD), p, 16, rec));
  uint8_t nonce2[16] = {9, 9, 8}; /* another connection: another server nonce */
  CHECK_OK(seal_derive(KEY, HELLO, sizeof(HELLO), nonce2, sizeof(nonce2), SEAL_SERVER, NULL, &other_rx));
  expect_refused(&other_rx, AAD, rec, 16, "failed authentication");
  uint8_t key2[SEAL_KEY_BYTES];
  memcpy(key2, KEY, sizeof(key2));
  key2[0] ^= 1; /* another job's key */
  CHECK_OK(seal_derive(key2, HELLO, sizeof(HELLO), NONCE, sizeof(NONCE), SEAL_SERVER, NULL, &back_rx));
  expect_refused(&back_rx, AAD, rec, 16, "failed authentication");
  /* reflected to the client: its rx key is the other direction's */
  CHECK_OK(seal_derive(KEY, HELLO, sizeof(HELLO), NONCE, sizeof(NONCE), SEAL_CLIENT, NULL, &self_rx));
  expect_refused(&self_rx, AAD, rec, 16, "failed authentication");
  struct seal none = {.counter = 0};
  CHECK(seal_record(&none, NULL, 0, p, 16, rec) != mscclppSuccess);
  seal_clear(&tx);
  CHECK(seal_record(&tx, NULL, 0, p, 16, rec) != mscclppSuccess);
  seal_clear(&rx), seal_clear(&other_rx), seal_clear(&back_rx), seal_clear(&self_rx);
}

int main(void) {
  err_quiet(1);
  roundtrip();
  tampered();
  replayed_reordered();
  wrong_key();
  printf("bootstrap_seal: ok\n");
  return 0;
}
