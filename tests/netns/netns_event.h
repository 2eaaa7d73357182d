/* netns_event.h - the clock of the namespace harness's failure injection (tests/netns/
 * netns_hosts.sh writes the time its kill or cut returned to $NETNS_DIR/event, from /proc/uptime),
 * for the programs that check how soon after it they failed. */
#ifndef MPP_TESTS_NETNS_EVENT_H_
#define MPP_TESTS_NETNS_EVENT_H_

#include <stdio.h>
#include <time.h>

/* CLOCK_BOOTTIME in seconds: what /proc/uptime shows the harness. */
static inline double netns_boot_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_BOOTTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The event's time from DIR/event, waiting up to 5 s for the file; -1 when none appeared (the
 * caller failed before the harness acted). */
static inline double netns_event_time(const char* dir) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/event", dir);
  for (int i = 0; i < 500; i++) {
    FILE* f = fopen(path, "re");
    double t = 0;
    int ok = f && fscanf(f, "%lf", &t) == 1;
    if (f) fclose(f);
    if (ok) return t;
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  return -1;
}

#endif /* MPP_TESTS_NETNS_EVENT_H_ */
