"""numba compilation of modlin's kernels: one decorator, and where compiled code lives.

Every kernel is compiled with :func:`njit`, which is ``numba.njit(cache=True)``
with one difference: the compiled machine code is cached in a per-user
directory, never beside the sources. numba's default puts it in the package's
``__pycache__`` when that is writable, and there pip does not own it: an
uninstall leaves ``site-packages/modlin/__pycache__`` behind, and that leftover
directory then shadows a later editable install as an empty namespace package.

The directory is, in order of precedence:

1. ``$MODLIN_CACHE_DIR``, when set;
2. ``$NUMBA_CACHE_DIR/modlin``, when numba's own override is set;
3. the user cache directory (``~/.cache/modlin`` on Linux, the platform's
   equivalent elsewhere),

with one subdirectory per numba version and kernel options (its code is not
portable across versions, and numba's cache is keyed on a kernel's source and
signature, not on options such as ``nogil``) and, below it, one per installed copy of modlin (numba's hash of the
source directory). Every entry there is valid only for the sources it was compiled
from, all of them (:func:`sources_digest`, with numba's own stamp of the kernel's
file): a kernel's machine code holds the kernels of other files that it calls, so an
edit to any file recompiles every kernel (numba alone would have kept running the old
code of a callee edited in another file). When none of these can be written, a fresh temporary
directory is used for this process, so a read-only home still never leads to
writes inside the package.

Several processes may compile into one directory at once (pytest-xdist workers, the
Dask workers of one machine): each save holds a file lock while it updates the index,
and every data file gets a name of its own (:class:`_SharedFile`). A loaded
specialisation whose signature is not the one asked for is compiled afresh, never
called.

Kernels shipped in the wheel
-----------------------------
A wheel built from these sources (``pip install .`` builds one) also carries the
kernels compiled on the machine that built it: ``setup.py`` runs ``modlin
warmup`` on the copy being packaged with ``MODLIN_BUILD_KERNELS=1``, which sends
every compiled specialisation to :data:`SHIPPED` (``modlin/_kernels``) and
writes a manifest of what they were compiled for. They are files of the wheel:
pip installs them, lists them in its record and removes them on uninstall, and
nothing writes there at run time. A process looks a kernel up there first, then
in the user cache, then compiles it (into the user cache). The shipped kernels
are used only when the manifest matches this process: the same numba, numpy and
Python versions, and the same sources (a digest of every ``.py`` file of the
package, so an edited installed file disables all of them, not just its own:
numba's cache does not see a change in a kernel that another file's kernel
inlines). numba itself keys every specialisation on the CPU it was compiled for,
so a wheel built elsewhere falls back to compiling, kernel by kernel.

Loading a kernel from the cache skips numba's full initialisation. numba's own
``Cache.load_overload`` first refreshes its target context: it imports and
registers every typing and lowering module numba has (and, through
``numba.np.linalg``, ``scipy.linalg``), 0.3-0.4 s once per process, none of which
running machine code already compiled needs. :class:`_Cache` starts only what that
code links against, numba's runtime (NRT: the allocator behind ``np.empty`` in a
kernel); the first kernel that has to be compiled gets the full refresh from
numba's compiler, as before. Should the shortcut fail (another numba with other
internals), the load falls back to numba's own.

What a first call still pays, once per process (measured with a warm cache):
NRT's initialisation, which compiles its small LLVM module (25-37 ms); NumPy's
``numpy.ma``, which numba's typing of an array argument imports (10-15 ms);
numba's scan of the installed packages' entry points (6-29 ms, with the number
of packages); and 3-6 ms per specialisation loaded. A kernel that allocates
(``np.empty``, ``np.zeros``, ``.copy()``, an array assigned to a slice) also makes
its cached code rebuild an environment in ``numba.np.arrayobj``, whose import
costs 40 ms more: so the kernels of the paths that must start fast (the CRT, the
Python-int conversions) take their scratch arrays from their callers.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import json
import os
import sys
import tempfile
import uuid
from functools import lru_cache

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.core import caching, cgutils, sigutils
from numba.extending import intrinsic

#: Options every kernel is compiled with. ``nogil``: the passes of one product run on
#: several Python threads at once (:mod:`modlin._engines.threads`).
OPTIONS = {"cache": True, "nogil": True}


#: Part of the cache directory's name: changes whenever :data:`OPTIONS` does.
_TAG = f"numba-{numba.__version__}-nogil"


# the package folder (this module sits one level down, in _engines/)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


#: The kernels a wheel carries (see the module docstring).
SHIPPED = os.path.join(_PACKAGE, "_kernels")


_MANIFEST = "manifest.json"


#: Set by ``setup.py`` while a wheel's kernels are compiled: they go to :data:`SHIPPED`.
BUILDING = os.environ.get("MODLIN_BUILD_KERNELS") == "1"


def cache_dir() -> str:
    """The directory where compiled kernels are cached (see the module docstring)."""
    root = os.environ.get("MODLIN_CACHE_DIR")
    if not root:
        if numba.config.CACHE_DIR:
            root = os.path.join(numba.config.CACHE_DIR, "modlin")
        else:
            from numba.misc.appdirs import AppDirs

            root = AppDirs("modlin", appauthor=False).user_cache_dir
    return os.path.join(root, _TAG)


@lru_cache(maxsize=1)
def sources_digest() -> str:
    """SHA-256 of every ``.py`` file of the installed package (relative paths and contents)."""
    h = hashlib.sha256()
    for top, dirs, files in os.walk(_PACKAGE):
        dirs[:] = sorted(d for d in dirs if d not in ("__pycache__", "_kernels"))
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(top, name)
            h.update(os.path.relpath(path, _PACKAGE).replace(os.sep, "/").encode() + b"\0")
            with open(path, "rb") as f:
                h.update(f.read())
    return h.hexdigest()


def _fingerprint() -> dict:
    """What shipped kernels must have been compiled for to be used in this process."""
    return {"numba": numba.__version__, "numpy": np.__version__, "python": "%d.%d" % sys.version_info[:2],
            "sources": sources_digest()}


def write_manifest() -> str:
    """Record, beside the kernels just compiled into :data:`SHIPPED`, what they were compiled for."""
    path = os.path.join(SHIPPED, _MANIFEST)
    with open(path, "w") as f:
        json.dump(_fingerprint(), f, indent=1)
    return path


@lru_cache(maxsize=1)
def shipped() -> bool:
    """Whether this copy of modlin carries compiled kernels it may use (see the module docstring)."""
    if BUILDING:
        return False
    try:
        with open(os.path.join(SHIPPED, _MANIFEST)) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return False
    return manifest == _fingerprint()


@lru_cache(maxsize=1)
def _fallback_dir() -> str:
    return os.path.join(tempfile.mkdtemp(prefix="modlin-numba-"), _TAG)


class _Locator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """numba cache locator for modlin's own source files (others are left to numba)."""

    def __init__(self, py_func, py_file, root: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = os.path.join(root, self.get_suitable_cache_subpath(py_file))

    def get_cache_path(self) -> str:
        return self._cache_path

    @classmethod
    def from_function(cls, py_func, py_file):
        path = os.path.abspath(py_file)
        if os.path.commonpath([path, _PACKAGE]) != _PACKAGE:
            return None
        for root in (cache_dir(), _fallback_dir()):
            locator = cls(py_func, py_file, root)
            try:
                locator.ensure_cache_path()
            except OSError:
                continue
            return locator
        return None


_impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl  # renamed in numba 0.60


if _Locator not in _impl._locator_classes:
    _impl._locator_classes.insert(0, _Locator)


try:
    import fcntl
except ImportError:  # Windows: saves run unlocked, still never into another save's data file
    fcntl = None


class _SharedFile(caching.IndexDataCacheFile):
    """numba's index and data files, safe when several processes compile into one directory.

    numba's own ``save`` reads the index, picks the first free data-file number, writes
    the index, then the data, with no lock: two processes that compile two new
    specialisations of one kernel at once (pytest-xdist workers, Dask workers of one
    machine) can each drop the other's index entry, or pick the same number, and then an
    index entry names the other one's machine code. Here a save holds an exclusive lock
    on ``<index>.lock`` while it rereads the index, writes its data under a name no other
    process can pick, and only then the index; a specialisation another process saved
    meanwhile is kept as it is, and data files the index does not name (an older
    source's, a lost file's entry written again) are deleted under the same lock.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        #: Keys whose entries :class:`_Cache` found naming another signature's code.
        self.rejected: set = set()

    @contextlib.contextmanager
    def _locked(self):
        if fcntl is None:
            yield
            return
        with open(self._index_path + ".lock", "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def save(self, key, data):
        with self._locked():
            overloads = self._load_index()
            if key in overloads and key not in self.rejected and os.path.exists(self._data_path(overloads[key])):
                return  # another process compiled it meanwhile: a loader may be reading its file
            self.rejected.discard(key)
            name = self._data_name_pattern.replace("{number:d}", uuid.uuid4().hex[:16])
            self._save_data(name, data)
            overloads[key] = name
            self._save_index(overloads)
            if fcntl is not None:  # unlocked, another process's data may not be indexed yet
                prefix, kept = self._data_name_pattern.split("{")[0], set(overloads.values())
                for stale in os.listdir(self._cache_path):
                    if stale.startswith(prefix) and stale.endswith(".nbc") and stale not in kept:
                        with contextlib.suppress(OSError):
                            os.unlink(os.path.join(self._cache_path, stale))


class _Cache(caching.FunctionCache):
    """numba's cache of compile results, first looked up among the kernels shipped in the
    wheel, and loaded without the full initialisation of numba's target context (see the
    module docstring)."""

    def __init__(self, py_func):
        super().__init__(py_func)
        source_dir = os.path.dirname(os.path.abspath(inspect.getfile(py_func)))
        self._shipped_path = os.path.normpath(os.path.join(SHIPPED, os.path.relpath(source_dir, _PACKAGE)))
        self._shipped_file = None
        # numba keys a file's cached kernels on that file's stamp alone; a kernel's machine code
        # also holds the kernels of other files it calls, so an edit there (an editable install
        # after a pull) would leave it running their old code. The package's digest in the
        # stamp makes any edited source recompile every kernel instead.
        self._cache_file = _SharedFile(cache_path=self._cache_path, filename_base=self._impl.filename_base,
                                       source_stamp=(self._impl.locator.get_source_stamp(), sources_digest()))
        if BUILDING:  # compiled for the wheel: the shipped directory is the cache
            os.makedirs(self._shipped_path, exist_ok=True)
            self._cache_file = self._shipped_tier()

    def _shipped_tier(self) -> caching.IndexDataCacheFile:
        if self._shipped_file is None:
            self._shipped_file = _SharedFile(
                cache_path=self._shipped_path, filename_base=self._impl.filename_base,
                source_stamp=sources_digest())
        return self._shipped_file

    def _load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        key = self._index_key(sig, target_context.codegen())
        for tier in ((self._shipped_tier(), self._cache_file) if shipped() else (self._cache_file,)):
            data = tier.load(key)
            if data is not None:
                cres = self._impl.rebuild(target_context, data)
                # The dispatcher calls what it gets with arguments of ``sig``: code compiled
                # for another signature (a cache written without :class:`_SharedFile`'s lock)
                # is compiled afresh instead.
                if tuple(cres.signature.args) == tuple(sigutils.normalize_signature(sig)[0]):
                    return cres
                tier.rejected.add(key)
        return None

    def load_overload(self, sig, target_context):
        try:
            from numba.core.runtime import rtsys

            rtsys.initialize(target_context)  # once per process; a no-op afterwards
            with self._guard_against_spurious_io_errors():
                return self._load_overload(sig, target_context)
        except Exception:  # noqa: BLE001  not the internals assumed here: numba's own way
            return super().load_overload(sig, target_context)


def _light_loads(disp):
    """Give the dispatcher ``disp`` a :class:`_Cache` in place of numba's ``FunctionCache``."""
    if type(getattr(disp, "_cache", None)) is caching.FunctionCache:
        disp._cache = _Cache(disp.py_func)
    return disp


def njit(fn=None, **options):
    """``numba.njit`` with :data:`OPTIONS` (cached as the module docstring says).

    Used bare (``@njit``) or with numba's options (``@njit(inline="always")``).
    """
    options = {**OPTIONS, **options}
    if fn is None:
        decorate = numba.njit(**options)
        return lambda f: _light_loads(decorate(f))
    return _light_loads(numba.njit(fn, **options))


@intrinsic
def fma(typingctx, a, b, c):
    """``a * b + c`` for float64, rounded once (LLVM's ``llvm.fma.f64``: one instruction on
    every x86-64 CPU since Haswell and every ARMv8, a correctly rounded libm call elsewhere).
    Where the exact result is a float, it is returned exactly: ``fma(-q, m, x)`` is
    ``x - q * m`` even when ``q * m`` itself has more than 53 bits."""
    sig = types.float64(types.float64, types.float64, types.float64)

    def codegen(context, builder, signature, args):
        double = ir.DoubleType()
        fnty = ir.FunctionType(double, [double, double, double])
        return builder.call(cgutils.get_or_insert_function(builder.module, fnty, "llvm.fma.f64"), args)

    return sig, codegen


def _memory(bits: int, kind):
    """``(peek, poke)`` intrinsics: the ``kind`` (``bits`` wide) stored at a memory address
    (an int64), and storing one there, as nopython loads and stores. For reading objects
    that the caller keeps alive and that no other thread can change meanwhile, and for
    writing objects the caller has just made and owns."""
    width = ir.IntType(bits)

    @intrinsic
    def peek(typingctx, address):
        def codegen(context, builder, signature, args):
            return builder.load(builder.inttoptr(args[0], width.as_pointer()), align=bits // 8)

        return kind(types.int64), codegen

    @intrinsic
    def poke(typingctx, address, value):
        def codegen(context, builder, signature, args):
            builder.store(args[1], builder.inttoptr(args[0], width.as_pointer()), align=bits // 8)
            return context.get_dummy_value()

        return types.void(types.int64, kind), codegen

    return peek, poke


peek_int64, poke_int64 = _memory(64, types.int64)


peek_uint32, poke_uint32 = _memory(32, types.uint32)


@intrinsic
def call_int64(typingctx, function, argument):
    """``function(argument)`` for the address of a C function taking and returning one
    64-bit integer or pointer (a C API function of the interpreter, found through
    ``ctypes``: passed at run time, so the kernel that calls it can be cached)."""
    sig = types.int64(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        f = builder.inttoptr(args[0], ir.FunctionType(i64, [i64]).as_pointer())
        return builder.call(f, [args[1]])

    return sig, codegen


@intrinsic
def call_void(typingctx, function, argument):
    """``function(argument)`` for the address of a C function taking one 64-bit integer or
    pointer and returning nothing (see :func:`call_int64`)."""
    sig = types.void(types.int64, types.int64)

    def codegen(context, builder, signature, args):
        f = builder.inttoptr(args[0], ir.FunctionType(ir.VoidType(), [ir.IntType(64)]).as_pointer())
        builder.call(f, [args[1]])
        return context.get_dummy_value()

    return sig, codegen
