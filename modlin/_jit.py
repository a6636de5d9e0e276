"""numba compilation of modlin's kernels: one decorator, and where its cache lives.

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
source directory). When none of these can be written, a fresh temporary
directory is used for this process, so a read-only home still never leads to
writes inside the package.

Loading a kernel from the cache skips numba's full initialisation. numba's own
``Cache.load_overload`` first refreshes its target context: it imports and
registers every typing and lowering module numba has (and, through
``numba.np.linalg``, ``scipy.linalg``), 0.3-0.4 s once per process, none of which
running machine code already compiled needs. :class:`_Cache` starts only what that
code links against, numba's runtime (NRT: the allocator behind ``np.empty`` in a
kernel); the first kernel that has to be compiled gets the full refresh from
numba's compiler, as before. Should the shortcut fail (another numba with other
internals), the load falls back to numba's own.
"""

from __future__ import annotations

import os
import tempfile
from functools import lru_cache

import numba
from numba.core import caching

__all__ = ["njit", "cache_dir"]

#: Options every kernel is compiled with. ``nogil``: the passes of one product run on
#: several Python threads at once (:mod:`modlin._threads`).
OPTIONS = {"cache": True, "nogil": True}
#: Part of the cache directory's name: changes whenever :data:`OPTIONS` does.
_TAG = f"numba-{numba.__version__}-nogil"

_PACKAGE = os.path.dirname(os.path.abspath(__file__))


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


class _Cache(caching.FunctionCache):
    """numba's cache of compile results, loading them without the full initialisation of
    numba's target context (see the module docstring)."""

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
