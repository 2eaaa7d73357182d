/* mscclppMemAlloc/mscclppMemFree of host memory, and what mem_classify says about pointers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sys/memalloc.h"
#include "helpers.h"

static void test_host_alloc(size_t size) {
  void* p = NULL;
  CHECK_OK(mscclppMemAlloc(&p, size, mscclppMemHost));
  CHECK(p != NULL && (uintptr_t)p % (uintptr_t)sysconf(_SC_PAGESIZE) == 0);
  const unsigned char* b = p;
  for (size_t i = 0; i < size; i++) CHECK_MSG(b[i] == 0, "byte %zu of a %zu-byte allocation is not zero", i, size);
  memset(p, 0x5a, size);
  struct mem_info info;
  CHECK_OK(mem_classify((char*)p + size / 2, size - size / 2, &info));
  CHECK(info.kind == MEM_KIND_HOST_SHM && info.base == p && info.alloc_size >= size && info.fd >= 0 && info.device == -1);
  /* A range running past the (page-rounded) allocation is refused. */
  CHECK_RES(mem_classify(p, info.alloc_size + 1, &info), mscclppInvalidArgument);
  CHECK_OK(mscclppMemFree(p));
  CHECK_RES(mscclppMemFree(p), mscclppInvalidArgument); /* double free */
}

/* The memory is MAP_SHARED: a forked child's writes are seen by the parent. */
static void test_shared_with_child(void) {
  uint64_t* p = NULL;
  CHECK_OK(mscclppMemAlloc((void**)&p, 4096, mscclppMemHost));
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    for (int i = 0; i < 512; i++) p[i] = (uint64_t)i * 3 + 1;
    _exit(0);
  }
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
  for (int i = 0; i < 512; i++) CHECK(p[i] == (uint64_t)i * 3 + 1);
  CHECK_OK(mscclppMemFree(p));
}

static void test_bad_args(void) {
  void* p = NULL;
  CHECK_RES(mscclppMemAlloc(NULL, 16, mscclppMemHost), mscclppInvalidArgument);
  CHECK_RES(mscclppMemAlloc(&p, 0, mscclppMemHost), mscclppInvalidArgument);
  CHECK_RES(mscclppMemAlloc(&p, 16, (mscclppMemKind_t)7), mscclppInvalidArgument);
  CHECK_RES(mscclppMemAlloc(&p, (size_t)1 << 62, mscclppMemHost), mscclppInvalidArgument);
  CHECK_RES(mscclppMemFree(NULL), mscclppInvalidArgument);
  char* m = malloc(64);
  CHECK_RES(mscclppMemFree(m), mscclppInvalidArgument);
  struct mem_info info;
  CHECK_OK(mem_classify(m + 3, 20, &info));
  CHECK(info.kind == MEM_KIND_HOST && info.base == m + 3 && info.alloc_size == 20 && info.fd == -1);
  free(m);
  /* CUDA memory without a usable device (or without CUDA in the build) is InvalidUsage. */
  mscclppResult_t r = mscclppMemAlloc(&p, 16, mscclppMemCuda);
  if (r == mscclppSuccess)
    CHECK_OK(mscclppMemFree(p));
  else
    CHECK_RES(r, mscclppInvalidUsage);
}

int main(void) {
  size_t sizes[] = {1, 8, 4095, 4096, 4097, 1 << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) test_host_alloc(sizes[i]);
  /* Many at once: the table grows and lookups find the right one. */
  void* ptrs[100];
  for (int i = 0; i < 100; i++) CHECK_OK(mscclppMemAlloc(&ptrs[i], 100 + (size_t)i, mscclppMemHost));
  for (int i = 0; i < 100; i++) {
    struct mem_info info;
    CHECK_OK(mem_classify((char*)ptrs[i] + 50, 50, &info));
    CHECK(info.base == ptrs[i]);
  }
  for (int i = 99; i >= 0; i -= 2) CHECK_OK(mscclppMemFree(ptrs[i]));
  for (int i = 0; i < 100; i += 2) CHECK_OK(mscclppMemFree(ptrs[i]));
  test_shared_with_child();
  test_bad_args();
  printf("transport_memalloc: OK\n");
  return 0;
}
