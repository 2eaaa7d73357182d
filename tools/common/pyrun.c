/* pyrun.c - runs a module of the mscclpp Python package (pyrun.h). */
#include "pyrun.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#ifndef MSCCLPP_SOURCE_PYTHON_DIR
#define MSCCLPP_SOURCE_PYTHON_DIR ""
#endif

/* Exit codes of the launcher snippet below that say what could not be imported. */
enum { PY_NO_PACKAGE = 97, PY_NO_MATPLOTLIB = 98, PY_NO_INTERPRETER = 127 };

/* Imports MODULE (argv[1]) from the installed package, else from the source tree (argv[2]: put on
 * sys.path, and on the package's __path__ where an older installed package lacks the module), checks
 * matplotlib, then runs the module's main() with the remaining arguments. */
static const char launcher[] =
    "import importlib, sys\n"
    "mod, src = sys.argv[1], sys.argv[2]\n"
    "try:\n"
    "    m = importlib.import_module(mod)\n"
    "except ImportError:\n"
    "    if src: sys.path.append(src)\n"
    "    pkg = sys.modules.get(mod.split('.')[0])\n"
    "    if pkg is not None and src: pkg.__path__.append(src + '/' + mod.split('.')[0])\n"
    "    try:\n"
    "        m = importlib.import_module(mod)\n"
    "    except ImportError as e:\n"
    "        print(e, file=sys.stderr); sys.exit(97)\n"
    "try:\n"
    "    import matplotlib\n"
    "except ImportError:\n"
    "    sys.exit(98)\n"
    "sys.exit(m.main(sys.argv[3:]))\n";

static int run_child(const char* py, const char* const* argv) {
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    execvp(py, (char* const*)argv);
    _exit(PY_NO_INTERPRETER);
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int pyrun_module(const char* tool, const char* module, const char* const* args, int nargs) {
  const char* py = getenv("PYTHON");
  if (py == NULL || *py == '\0') py = "python3";
  const char** argv = calloc((size_t)nargs + 7, sizeof(char*));
  if (argv == NULL) return cli_fail(tool, "out of memory");
  int k = 0;
  argv[k++] = py, argv[k++] = "-c", argv[k++] = launcher, argv[k++] = module, argv[k++] = MSCCLPP_SOURCE_PYTHON_DIR;
  for (int i = 0; i < nargs; i++) argv[k++] = args[i];
  fflush(NULL);
  int rc = run_child(py, argv);
  free(argv);
  switch (rc) {
    case 0: return 0;
    case PY_NO_INTERPRETER:
      return cli_fail(tool, "cannot run the Python interpreter '%s' (set PYTHON to one with the mscclpp package)", py);
    case PY_NO_PACKAGE:
      return cli_fail(tool, "%s cannot import %s: install the package with `pip install .[draw]` in the source tree", py,
                      module);
    case PY_NO_MATPLOTLIB:
      return cli_fail(tool, "%s has no matplotlib, which pictures need: `pip install matplotlib` (or `pip install .[draw]`)",
                      py);
    default: return 1; /* the module said why */
  }
}
