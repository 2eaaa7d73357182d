/* The fd service: a forked process fetches a memfd by id and key and maps it; wrong keys, wrong
 * communicators, bad ranks and withdrawn exports are refused. */
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "helpers.h"
#include "transport/fdpass.h"

#define PAGE 4096

static void child_maps(const uint8_t* comm_id, uint64_t id, uint64_t key) {
  int fd = -1;
  uint64_t size = 0;
  CHECK_OK(fd_fetch(comm_id, 1, 0, id, key, 5000, &fd, &size));
  CHECK(size == PAGE);
  unsigned char* p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  CHECK(p != MAP_FAILED);
  close(fd);
  for (int i = 0; i < PAGE; i++) CHECK(p[i] == (unsigned char)(i % 251));
  for (int i = 0; i < PAGE; i++) p[i] = (unsigned char)(255 - i % 200);
  munmap(p, PAGE);
}

int main(void) {
  uint8_t comm_id[FD_KEY_BYTES], other[FD_KEY_BYTES]; /* the communicator's key */
  CHECK(getrandom(comm_id, sizeof(comm_id), 0) == (ssize_t)sizeof(comm_id));
  memcpy(other, comm_id, sizeof(other));
  other[0] ^= 1;
  struct fd_service* s = NULL;
  CHECK_OK(fd_service_start(comm_id, 0, 2, &s));
  int mfd = memfd_create("test", MFD_CLOEXEC);
  CHECK(mfd >= 0 && ftruncate(mfd, PAGE) == 0);
  unsigned char* mine = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
  CHECK(mine != MAP_FAILED);
  for (int i = 0; i < PAGE; i++) mine[i] = (unsigned char)(i % 251);
  uint64_t id = 0, key = 0;
  CHECK_OK(fd_service_add(s, dup(mfd), PAGE, &id, &key));

  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    child_maps(comm_id, id, key);
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK_MSG(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child failed (status %d)", status);
  for (int i = 0; i < PAGE; i++) CHECK(mine[i] == (unsigned char)(255 - i % 200));

  int fd = -1;
  uint64_t size = 0;
  CHECK_RES(fd_fetch(comm_id, 1, 0, id, key ^ 1, 2000, &fd, &size), mscclppRemoteError); /* wrong key */
  CHECK(strstr(mscclppGetLastError(), "wrong key") != NULL);
  CHECK_RES(fd_fetch(comm_id, 1, 0, id + 1, key, 2000, &fd, &size), mscclppRemoteError); /* unknown id */
  CHECK_RES(fd_fetch(comm_id, 5, 0, id, key, 2000, &fd, &size), mscclppRemoteError);     /* rank out of range */
  CHECK(strstr(mscclppGetLastError(), "not a rank") != NULL);
  CHECK_RES(fd_fetch(comm_id, 0, 0, id, key, 2000, &fd, &size), mscclppRemoteError); /* the owner itself */
  CHECK_RES(fd_fetch(other, 1, 0, id, key, 200, &fd, &size), mscclppRemoteError); /* no such service */
  CHECK(strstr(mscclppGetLastError(), "unreachable") != NULL);
  CHECK(fd == -1);

  /* A second fetch in this process works as well (fds are passed to any process that asks). */
  CHECK_OK(fd_fetch(comm_id, 1, 0, id, key, 2000, &fd, &size));
  CHECK(fd >= 0 && size == PAGE);
  close(fd);

  fd_service_remove(s, id);
  fd = -1;
  CHECK_RES(fd_fetch(comm_id, 1, 0, id, key, 2000, &fd, &size), mscclppRemoteError);
  fd_service_stop(s);
  munmap(mine, PAGE);
  close(mfd);
  printf("transport_fdpass: OK\n");
  return 0;
}
