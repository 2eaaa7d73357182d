/* affinity.c - pinning the proxy thread to the CPUs near its GPU (the NUMA node of the PCI device),
 * so that its polls of the FIFO and its driver calls stay local. Best effort: a machine without
 * the sysfs file, or a sandbox that refuses the affinity, leaves the thread where it is. */
#include <ctype.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proxy/service.h"

/* Parses a sysfs CPU list ("0-15,32-47") into set; the number of CPUs added. */
static int parse_cpulist(const char* text, cpu_set_t* set) {
  int added = 0;
  const char* p = text;
  while (*p != '\0' && *p != '\n') {
    char* end = NULL;
    long lo = strtol(p, &end, 10), hi = lo;
    if (end == p || lo < 0) return added;
    p = end;
    if (*p == '-') {
      hi = strtol(p + 1, &end, 10);
      if (end == p + 1 || hi < lo) return added;
      p = end;
    }
    for (long c = lo; c <= hi && c < CPU_SETSIZE; c++, added++) CPU_SET((int)c, set);
    if (*p == ',') p++;
  }
  return added;
}

int proxy_pin_near(const char* bus_id) {
  char id[32], path[128], text[1024];
  size_t n = strlen(bus_id);
  if (n == 0 || n >= sizeof(id)) return -1;
  for (size_t i = 0; i <= n; i++) id[i] = (char)tolower((unsigned char)bus_id[i]);
  snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/local_cpulist", id);
  FILE* f = fopen(path, "re");
  if (f == NULL) return -1;
  size_t got = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[got] = '\0';
  cpu_set_t set;
  CPU_ZERO(&set);
  if (parse_cpulist(text, &set) == 0) return -1;
  return pthread_setaffinity_np(pthread_self(), sizeof(set), &set) == 0 ? 0 : -1;
}
