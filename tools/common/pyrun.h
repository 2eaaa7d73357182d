/* pyrun.h - running a module of the mscclpp Python package from a tool (pictures: mscclpp.draw,
 * mscclpp.perfplot), with a clear error when Python, the package or matplotlib is missing. */
#ifndef MPP_TOOLS_PYRUN_H_
#define MPP_TOOLS_PYRUN_H_

/* Runs `$PYTHON -m MODULE ARGS...` (python3 when PYTHON is unset) and waits for it. The package is
 * the installed one, else this source tree's python/ directory. Returns 0 when the module succeeded;
 * otherwise prints one line "TOOL: ..." (no interpreter, no mscclpp package, no matplotlib: with the
 * command that installs it) unless the module printed its own error, and returns 1. */
int pyrun_module(const char* tool, const char* module, const char* const* args, int nargs);

#endif /* MPP_TOOLS_PYRUN_H_ */
