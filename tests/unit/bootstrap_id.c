/* bootstrap_id.c - unique ids: "host:port" parsing (good and bad forms), ids from
 * bootstrap_unique_id, refusal of malformed ids and arguments by bootstrap_init, and a one-rank
 * rendezvous through each kind of id. */
#include <arpa/inet.h>
#include <string.h>
#include <unistd.h>

#include "bootstrap/bootstrap.h"
#include "bootstrap/wire.h"
#include "helpers.h"

static int free_port(void) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof(a);
  CHECK(s >= 0 && bind(s, (struct sockaddr*)&a, sizeof(a)) == 0);
  CHECK(getsockname(s, (struct sockaddr*)&a, &len) == 0);
  close(s);
  return ntohs(a.sin_port);
}

static void test_parse(void) {
  mscclppUniqueId id1, id2;
  struct wire_id w1, w2;
  CHECK_OK(bootstrap_id_from_address("127.0.0.1:29500", 1, &id1));
  CHECK_OK(wire_decode_id(id1.internal, sizeof(id1.internal), &w1));
  CHECK(w1.root.sa.sa_family == AF_INET && ntohs(w1.root.sin.sin_port) == 29500);
  CHECK(ntohl(w1.root.sin.sin_addr.s_addr) == 0x7f000001);
  CHECK_OK(bootstrap_id_from_address("127.0.0.1:29500", 3, &id2));
  CHECK_OK(wire_decode_id(id2.internal, sizeof(id2.internal), &w2));
  CHECK(wire_secret_equal(w1.secret, w2.secret)); /* every rank derives the same secret */
  CHECK_OK(bootstrap_id_from_address("[::1]:5", 2, &id1));
  CHECK_OK(wire_decode_id(id1.internal, sizeof(id1.internal), &w1));
  CHECK(w1.root.sa.sa_family == AF_INET6 && ntohs(w1.root.sin6.sin6_port) == 5);
  CHECK_OK(bootstrap_id_from_address("localhost:80", 1, &id1));
  const char* bad[] = {"127.0.0.1", "127.0.0.1:", ":80", "[::1]80", "1.2.3.4:99999", "1.2.3.4:x1", ""};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    mscclppResult_t r = bootstrap_id_from_address(bad[i], 1, &id1);
    CHECK_MSG(r == mscclppInvalidArgument, "\"%s\" gave %d", bad[i], (int)r);
  }
  CHECK_RES(bootstrap_id_from_address("127.0.0.1:1", -1, &id1), mscclppInvalidArgument);
  CHECK_RES(bootstrap_id_from_address(NULL, 1, &id1), mscclppInvalidArgument);
}

static void test_bad_init(void) {
  mscclppUniqueId id;
  struct bootstrap* b = NULL;
  memset(&id, 0, sizeof(id));
  CHECK_RES(bootstrap_init(&id, 0, 1, 1000, &b), mscclppInvalidArgument);
  CHECK(strstr(mscclppGetLastError(), "unique id") != NULL);
  CHECK_OK(bootstrap_id_from_address("127.0.0.1:29500", 1, &id));
  CHECK_RES(bootstrap_init(&id, 2, 2, 1000, &b), mscclppInvalidArgument);
  CHECK_RES(bootstrap_init(&id, -1, 2, 1000, &b), mscclppInvalidArgument);
  CHECK_RES(bootstrap_init(&id, 0, 0, 1000, &b), mscclppInvalidArgument);
  CHECK_RES(bootstrap_init(&id, 0, WIRE_MAX_RANKS + 1, 1000, &b), mscclppInvalidArgument);
  CHECK(b == NULL);
}

/* A rendezvous of one rank: everything works and is trivial. */
static void one_rank(const mscclppUniqueId* id) {
  struct bootstrap* b = NULL;
  CHECK_OK(bootstrap_init(id, 0, 1, 10000, &b));
  CHECK(bootstrap_rank(b) == 0 && bootstrap_nranks(b) == 1);
  int v = 42, w = 0;
  CHECK_OK(bootstrap_allgather(b, &v, sizeof(v)));
  CHECK(v == 42);
  CHECK_OK(bootstrap_barrier(b));
  CHECK_OK(bootstrap_send(b, 0, 5, &v, sizeof(v)));
  CHECK_OK(bootstrap_recv(b, 0, 5, &w, sizeof(w)));
  CHECK(w == 42);
  CHECK_RES(bootstrap_send(b, 1, 5, &v, sizeof(v)), mscclppInvalidArgument);
  CHECK_RES(bootstrap_recv(b, -1, 5, &v, sizeof(v)), mscclppInvalidArgument);
  bootstrap_abort(b);
  CHECK_RES(bootstrap_barrier(b), mscclppAborted);
  CHECK_RES(bootstrap_send(b, 0, 5, &v, sizeof(v)), mscclppAborted);
  CHECK_RES(bootstrap_recv(b, 0, 5, &v, sizeof(v)), mscclppAborted);
  bootstrap_destroy(b);
}

int main(void) {
  test_parse();
  test_bad_init();
  mscclppUniqueId id;
  char addr[64];
  snprintf(addr, sizeof(addr), "127.0.0.1:%d", free_port());
  CHECK_OK(bootstrap_id_from_address(addr, 0, &id)); /* rank 0 starts the root */
  one_rank(&id);
  CHECK_OK(bootstrap_unique_id(&id));
  one_rank(&id);
  printf("bootstrap_id: ok\n");
  return 0;
}
