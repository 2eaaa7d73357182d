"""Native algorithms: compile_native builds a user's C, C++ or CUDA file against the package's
headers and libmscclpp into a shared library (cached on disk), loads it and returns a module-like
object whose attributes are the file's factories (include/mscclpp/native_algorithm.h):

    mod = mscclpp.compile_native(name="my_algos", file="customized_allgather.cu")
    algo = mscclpp.Algorithm.create_from_native_capsule(mod.create_allgather_algorithm())
    algo.execute(comm, x_ptr, y_ptr, x_bytes, y_bytes, dtype, stream=s)

The cache: $MSCCLPP_CACHE_DIR (default ~/.cache/mscclpp)/native/<key>/<name>.so, the key a hash of
the source, the compiler's command and version, and the package's headers and library; ranks of
one host that compile at once wait on a lock and share one build. docs/python.md has the rest."""
import ctypes
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

_PKG = Path(__file__).resolve().parent
_HEADER = os.path.join("mscclpp", "native_algorithm.h")


class NativeCompileError(RuntimeError):
    """The compiler failed (or is missing): .command (list), .returncode and .output (its stdout
    and stderr) say how; the message holds all three."""

    def __init__(self, message, command=None, returncode=None, output=""):
        super().__init__(message)
        self.command, self.returncode, self.output = command, returncode, output


def cache_dir(kind):
    """$MSCCLPP_CACHE_DIR/kind (default ~/.cache/mscclpp/kind), made when missing."""
    root = os.environ.get("MSCCLPP_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "mscclpp")
    path = Path(root) / kind
    path.mkdir(parents=True, exist_ok=True)
    return path


def get_include():
    """The folder holding the public headers (mscclpp/*.h): the package's include/ in an installed
    package, the repository's include/ in a source tree; $MSCCLPP_INCLUDE_DIR overrides."""
    candidates = [os.environ.get("MSCCLPP_INCLUDE_DIR"), _PKG / "include", _PKG.parent.parent / "include"]
    for c in candidates:
        if c and os.path.isfile(os.path.join(c, _HEADER)):
            return str(c)
    raise RuntimeError("mscclpp: the public headers (%s) are in none of %s; set MSCCLPP_INCLUDE_DIR"
                       % (_HEADER, [str(c) for c in candidates if c]))


def _loaded_libmscclpp():
    """The file of the libmscclpp the extension loaded (from /proc/self/maps), or None."""
    from mscclpp import _mscclpp  # noqa: F401 - loads libmscclpp into the process
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if re.search(r"/libmscclpp\.so(\.\d+)*$", path):
                    return path
    except OSError:
        pass
    return None


def get_lib():
    """The libmscclpp file native algorithms link against: $MSCCLPP_LIB_DIR's, else the package's
    lib/ (an installed package), else the one the extension loaded (editable or build-tree setups),
    so that they share the process's one copy of the library."""
    dirs = [os.environ.get("MSCCLPP_LIB_DIR"), str(_PKG / "lib")]
    for d in dirs:
        for name in ("libmscclpp.so", "libmscclpp.so.0"):
            if d and os.path.isfile(os.path.join(d, name)):
                return os.path.join(d, name)
    found = _loaded_libmscclpp()
    if found:
        return found
    raise RuntimeError("mscclpp: libmscclpp.so is in none of %s and not loaded; set MSCCLPP_LIB_DIR" % [d for d in dirs if d])


def _nvcc():
    for c in (os.environ.get("MSCCLPP_NVCC"), os.environ.get("CUDA_HOME") and os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc")):
        if c:
            return c
    return shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"


def _cuda_arch(arch):
    """nvcc's -arch flags: arch ("sm_90", "90", "native"), else $MSCCLPP_NATIVE_CUDA_ARCH, else this
    machine's first GPU (nvidia-smi), else none (nvcc's default, PTX compiled when loaded)."""
    arch = arch or os.environ.get("MSCCLPP_NATIVE_CUDA_ARCH")
    if not arch and shutil.which("nvidia-smi"):
        try:
            out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                                 capture_output=True, text=True, timeout=30).stdout.split()
            arch = out[0].replace(".", "") if out else None
        except (OSError, subprocess.SubprocessError):
            arch = None
    if not arch:
        return []
    return ["-arch=" + (arch if arch == "native" or arch.startswith(("sm_", "compute_")) else "sm_" + arch)]


def _command(src, out, inc, lib, arch, extra_flags):
    """The compiler's command line for src (by its suffix), writing the shared library out."""
    suffix = src.suffix.lower()
    libdir = os.path.dirname(lib)
    link = ["-L" + libdir, "-l:" + os.path.basename(lib)]  # after the source (linkers that drop unused libraries)
    if suffix == ".cu":
        return ([_nvcc(), "-std=c++17", "-O2", "-shared", "-Xcompiler", "-fPIC"] + _cuda_arch(arch) +
                ["-I" + inc] + list(extra_flags) + ["-o", str(out), str(src)] + link + ["-Xlinker", "-rpath," + libdir])
    if suffix == ".c":
        cc = [os.environ.get("CC") or "cc", "-std=c11"]
    elif suffix in (".cc", ".cpp", ".cxx"):
        cc = [os.environ.get("CXX") or "c++", "-std=c++17"]
    else:
        raise ValueError("compile_native: %s: a .cu, .c, .cc, .cpp or .cxx file, please" % src)
    return cc + ["-O2", "-fPIC", "-shared", "-I" + inc] + list(extra_flags) + ["-o", str(out), str(src)] + link + [
        "-Wl,-rpath," + libdir]


_versions = {}


def _compiler_version(compiler):
    """The first lines of `compiler --version` (cached per process); NativeCompileError when missing."""
    if compiler not in _versions:
        try:
            p = subprocess.run([compiler, "--version"], capture_output=True, text=True, timeout=120)
        except OSError as e:
            raise NativeCompileError("compile_native: compiler %r not found (%s); for .cu files set MSCCLPP_NVCC or "
                                     "CUDA_HOME, for .c/.cpp CC/CXX, or put it on PATH" % (compiler, e),
                                     [compiler]) from None
        _versions[compiler] = (p.stdout + p.stderr).strip()
    return _versions[compiler]


def _headers_digest(inc):
    h = hashlib.sha256()
    for f in sorted(Path(inc, "mscclpp").glob("*.h")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _run_compiler(cmd, name, src):
    """Runs cmd; NativeCompileError with the compiler's output when it fails."""
    try:
        p = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as e:
        raise NativeCompileError("compile_native(%r): cannot run %s: %s" % (name, cmd[0], e), cmd) from None
    if p.returncode != 0:
        output = (p.stdout + p.stderr).strip()
        raise NativeCompileError("compile_native(%r): %s failed (exit %d) on %s:\n%s\ncommand: %s"
                                 % (name, os.path.basename(cmd[0]), p.returncode, src, output, " ".join(cmd)),
                                 cmd, p.returncode, output)


class _Factory:
    """A factory of a native module: calling it returns a PyCapsule of its algorithm's def."""

    def __init__(self, module, name, address):
        self._module, self.__name__, self._address = module, name, address

    def __call__(self):
        from mscclpp import _mscclpp
        return _mscclpp._native_factory_call(self._address, self._module)

    def __repr__(self):
        return "<native factory %s of %s>" % (self.__name__, self._module.__file__)


class NativeModule:
    """A compiled native library: its attributes are its factories (functions declared with
    MSCCLPP_NATIVE_FACTORY). .library is the ctypes.CDLL (for other functions it exports),
    .compiled whether this call ran the compiler (False: the cache served it)."""

    def __init__(self, name, path, compiled):
        from mscclpp import _mscclpp  # noqa: F401 - libmscclpp first, so the library links to the same copy
        self.__name__, self.__file__, self.compiled = name, str(path), compiled
        self.library = ctypes.CDLL(str(path))

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        try:
            fn = getattr(self.library, attr)
        except AttributeError:
            raise AttributeError("native module %r (%s) exports no function %r (declare it with "
                                 "MSCCLPP_NATIVE_FACTORY(%s))" % (self.__name__, self.__file__, attr, attr)) from None
        factory = _Factory(self, attr, ctypes.cast(fn, ctypes.c_void_p).value)
        setattr(self, attr, factory)
        return factory

    def __repr__(self):
        return "<native module %r from %r>" % (self.__name__, self.__file__)


def compile_native(name, file, extra_flags=(), arch=None):
    """Compiles file (.cu with nvcc, .c with $CC or cc, .cpp/.cc/.cxx with $CXX or c++) into
    <cache>/native/<key>/<name>.so linked against libmscclpp (get_lib()) with -I get_include(),
    unless the cache holds it already, and loads it. extra_flags: more compiler flags; arch: nvcc's
    target ("sm_90", "90", "native"; default $MSCCLPP_NATIVE_CUDA_ARCH or this machine's GPU).
    Raises NativeCompileError (a RuntimeError) with the compiler's output when it fails."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.-]*", name or ""):
        raise ValueError("compile_native: name %r must be a plain file name (letters, digits, _ . -)" % name)
    src = Path(file).resolve()
    if not src.is_file():
        raise FileNotFoundError("compile_native(%r): no file %s" % (name, src))
    inc, lib = get_include(), get_lib()
    cmd = _command(src, Path("OUT"), inc, lib, arch, extra_flags)
    key = hashlib.sha256(json.dumps({
        "source": hashlib.sha256(src.read_bytes()).hexdigest(), "name": name, "command": cmd,
        "compiler": _compiler_version(cmd[0]), "headers": _headers_digest(inc),
        "lib": [lib, os.path.getsize(lib), os.path.getmtime(lib)],
    }, sort_keys=True).encode()).hexdigest()[:32]
    folder = cache_dir("native") / key
    folder.mkdir(exist_ok=True)
    target = folder / (name + ".so")
    compiled = False
    with open(folder / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # ranks of one host compiling at once: one builds, the others wait
        if not target.exists():
            fd, tmp = tempfile.mkstemp(prefix=name + ".", suffix=".so.tmp", dir=folder)
            os.close(fd)
            try:
                _run_compiler(_command(src, Path(tmp), inc, lib, arch, extra_flags), name, src)
                os.replace(tmp, target)
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
            compiled = True
    return NativeModule(name, target, compiled)
