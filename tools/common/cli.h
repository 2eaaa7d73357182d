/* cli.h - what every command-line tool shares: strict number and size parsing, help text from an
 * option table, one-line errors, and keeping the library from echoing errors the tool prints. */
#ifndef MPP_TOOLS_CLI_H_
#define MPP_TOOLS_CLI_H_

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One option for --help: its spellings ("-n, --iters"), its argument ("N", or NULL for a flag)
 * and what it does (may hold '\n' for more lines). */
struct cli_opt {
  const char* names;
  const char* arg;
  const char* help;
};

/* A tool's help: its name, usage lines, a paragraph, the options ({NULL} ends the list) and text
 * after them (or NULL). */
struct cli_help {
  const char* tool;
  const char* usage;
  const char* about;
  const struct cli_opt* opts;
  const char* after;
};

/* Writes the help to stdout (the caller exits 0). */
void cli_print_help(const struct cli_help* h);

/* Writes "TOOL: <message> (TOOL --help lists the options)" as one line on stderr and returns 2,
 * the exit status of a bad command line. */
int cli_usage_error(const char* tool, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes "TOOL: <message>" as one line on stderr and returns 1. */
int cli_fail(const char* tool, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

/* A byte count: digits, then optionally K, M, G, T (powers of 1024) in any case, with an optional
 * B, iB or iB spelled KB/KiB/MB/MiB...; a lone B is bytes. Nothing else may follow, and the value
 * must fit in 64 bits. Returns 0 and sets *out, or -1 with why (len bytes) saying what is wrong. */
int cli_parse_size(const char* s, uint64_t* out, char* why, size_t len);

/* A decimal integer in [lo, hi] (no trailing text). 0 ok, -1 not. */
int cli_parse_int(const char* s, long long lo, long long hi, long long* out);

/* A finite number (no trailing text). 0 ok, -1 not. */
int cli_parse_double(const char* s, double* out);

/* The tool prints the library's errors itself (mscclppGetLastError): the library stops logging
 * them at WARN level, unless the user chose a log level (MSCCLPP_LOG_LEVEL, MSCCLPP_DEBUG). */
void cli_quiet_library_errors(void);

/* mscclppGetLastError() without its "file.c:123: " source location (for users' eyes). */
const char* cli_last_error(void);

/* Whether argv[1..argc) holds -h or --help before any "--". */
int cli_wants_help(int argc, char** argv);

#endif /* MPP_TOOLS_CLI_H_ */
