"""Resource limits every product obeys: a memory budget, threads, progress.

:func:`limits` sets them for the whole process, like threadpoolctl's
``threadpool_limits``: it applies at once, and used as a context manager it
restores the previous limits on exit. The defaults come from the environment
(``MODLIN_MEMORY``, ``MODLIN_THREADS``, ``MODLIN_PROGRESS``), read at the first
product, else from the machine.
"""

from __future__ import annotations

import numbers
import os
import re
import threading
from dataclasses import dataclass, replace
from functools import lru_cache

__all__ = ["Limits", "limits", "current", "parse_size", "format_size", "default_memory", "planning_threads"]

#: The default budget is a quarter of the physical memory, capped here.
DEFAULT_MEMORY_CAP = 4 * 2**30

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_size(size, what: str = "memory") -> int:
    """Bytes from an int or a string such as ``"1.5GiB"``, ``"512 MiB"``, ``"2G"`` or ``"1e9"``.

    Decimal units (kB, MB, GB, TB; also k, M, G, T) are powers of 1000, binary
    ones (KiB, MiB, GiB, TiB) powers of 1024.
    """
    if isinstance(size, bool):
        raise TypeError(f"{what} must be a size in bytes (an int or a string like '1.5GiB'), not {size!r}")
    if isinstance(size, int):
        value = size
    elif isinstance(size, str):
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", size)
        unit = m and _UNITS.get(m.group(2).lower())
        if not m or unit is None:
            raise ValueError(f"{what} = {size!r} is not a size: write bytes as an int, or a number with a "
                             "unit such as '1.5GiB', '512MiB' or '2GB'")
        value = int(float(m.group(1)) * unit)
    else:
        raise TypeError(f"{what} must be a size in bytes (an int or a string like '1.5GiB'), not "
                        f"{type(size).__name__}")
    if value <= 0:
        raise ValueError(f"{what} must be positive, got {size!r}")
    return value


def format_size(n: int) -> str:
    """``n`` bytes as a short binary-unit string (``"1.5 GiB"``)."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            value = n / scale
            return f"{value:.3g} {unit}" if value < 1000 else f"{value:.0f} {unit}"
    return f"{n} B"


def _physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):  # not POSIX
        return None


def default_memory() -> int:
    """A quarter of the physical memory, at most 4 GiB (4 GiB when it cannot be read)."""
    phys = _physical_memory()
    return DEFAULT_MEMORY_CAP if not phys else min(phys // 4, DEFAULT_MEMORY_CAP)


@lru_cache(maxsize=1)
def blas_threads() -> int:
    """The threads BLAS uses in this process (threadpoolctl), else the number of CPUs."""
    try:
        from threadpoolctl import threadpool_info

        counts = [lib["num_threads"] for lib in threadpool_info() if lib.get("user_api") == "blas"]
    except Exception:  # threadpoolctl missing or unable to inspect the libraries
        counts = []
    return max(counts) if counts else (os.cpu_count() or 1)


def _threads(value, what: str) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a positive int, got {value!r}") from None
    if isinstance(value, bool) or n < 1 or isinstance(value, float) and n != value:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return n


def planning_threads(threads) -> int:
    """The cores a plan is weighed for: ``threads`` (a positive int), or when None those of
    :func:`current`."""
    if threads is None:
        return current().threads
    if not isinstance(threads, numbers.Integral) or isinstance(threads, bool) or threads < 1:
        raise ValueError(f"threads must be a positive int, got {threads!r}")
    return int(threads)


def _flag(value, what: str) -> bool:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("1", "true", "yes", "on"):
        return True
    if text in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"{what} must be a boolean (1/0, true/false), got {value!r}")


@dataclass(frozen=True)
class Limits:
    """The limits in force.

    Attributes
    ----------
    memory : int
        Working memory, in bytes, a product may use beyond its operands and
        its result.
    threads : int
        Cores a product runs on: worker threads, each with its slab of rows
        and BLAS on one thread (see :mod:`modlin._threads`).
    progress : bool
        Whether long products show a progress bar on standard error.
    """

    memory: int
    threads: int
    progress: bool


def _from_environment() -> Limits:
    env = os.environ
    memory = parse_size(env["MODLIN_MEMORY"], "MODLIN_MEMORY") if env.get("MODLIN_MEMORY") else default_memory()
    threads = _threads(env["MODLIN_THREADS"], "MODLIN_THREADS") if env.get("MODLIN_THREADS") else blas_threads()
    return Limits(memory, threads, _flag(env.get("MODLIN_PROGRESS", ""), "MODLIN_PROGRESS"))


_lock = threading.Lock()
_state: list[Limits] = []  # the limits in force, set at the first use


def current() -> Limits:
    """The limits in force (from the environment or the machine until :func:`limits` sets them)."""
    if not _state:
        with _lock:
            if not _state:
                _state.append(_from_environment())
    return _state[0]


class limits:
    """Set the memory budget, threads and progress display of every modlin product.

    Applies at once to the whole process (like ``threadpoolctl.threadpool_limits``);
    used as a context manager, it restores the previous limits on exit.
    Arguments left as None keep their current value.

    Parameters
    ----------
    memory : int or str, optional
        Working memory a product may use beyond its operands and result: bytes,
        or a string such as ``"1.5GiB"``. Products larger than this are computed
        tile by tile (see :meth:`Plan.explain <modlin.Plan.explain>`). Default:
        ``$MODLIN_MEMORY``, else a quarter of the physical memory, at most 4 GiB.
    threads : int, optional
        Cores a product runs on. With more than one, the product's rows are
        split across that many worker threads, each running its GEMMs with BLAS
        on one thread and its element-wise passes beside them; with one, the
        passes run on the calling thread and the GEMMs on BLAS' own threads.
        Results are the same for any value. Default: ``$MODLIN_THREADS``, else
        the threads BLAS uses.
    progress : bool, optional
        Show a progress bar on standard error for products expected to take
        more than about two seconds. Default: ``$MODLIN_PROGRESS``, else off.

    Examples
    --------
    >>> import numpy as np, modlin
    >>> with modlin.limits(memory="64MiB"):
    ...     modlin.limits.current().memory
    67108864
    >>> A = np.ones((300, 300), dtype=np.int64)
    >>> with modlin.limits(memory="1MiB"):   # tiles of the output, same result
    ...     C = modlin.matmul(A, A, 2**31 - 1)
    >>> int(C[0, 0])
    300
    """

    current = staticmethod(current)

    def __init__(self, memory=None, threads=None, progress=None):
        new = current()
        if memory is not None:
            new = replace(new, memory=parse_size(memory))
        if threads is not None:
            new = replace(new, threads=_threads(threads, "threads"))
        if progress is not None:
            new = replace(new, progress=_flag(progress, "progress"))
        with _lock:
            self._previous = _state[0]
            _state[0] = new

    def restore(self) -> None:
        """Put back the limits that were in force before this call."""
        with _lock:
            _state[0] = self._previous

    def __enter__(self) -> "limits":
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    def __repr__(self) -> str:
        lim = current()
        return f"modlin.limits(memory={format_size(lim.memory)!r}, threads={lim.threads}, progress={lim.progress})"
