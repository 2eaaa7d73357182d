/* crash_report.c - linked into every test program: stdout line-buffered (a test killed by a
 * signal still shows how far it got) and, on SIGSEGV/SIGBUS/SIGFPE/SIGILL/SIGABRT, a backtrace of
 * raw addresses plus the executable's load address on stderr, so that a crash on a machine
 * without debuggers can be resolved with addr2line against the unstripped build. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void write_str(const char* s) { (void)!write(STDERR_FILENO, s, strlen(s)); }

/* Async-signal-safe enough for a dying process: backtrace_symbols_fd writes with write(2). */
static void on_crash(int sig) {
  char line[96];
  snprintf(line, sizeof(line), "\n*** test crashed with signal %d (pid %d); backtrace:\n", sig, (int)getpid());
  write_str(line);
  void* frames[48];
  int n = backtrace(frames, 48);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install_crash_report(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  void* warm[1];
  backtrace(warm, 1); /* loads libgcc now, not inside the handler */
  static const int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
  for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) signal(sigs[i], on_crash);
}
