"""Resource limits every product obeys: a memory budget, threads, progress.

:func:`limits` sets them for the current thread (more exactly, the current
:mod:`contextvars` context: an asyncio task has its own), like threadpoolctl's
``threadpool_limits`` but not for the whole process: it applies at once, and used
as a context manager it restores the previous limits on exit. Two threads that
set limits never see each other's, whatever the order their blocks end in. Where
none are set, the process' defaults hold: from the environment (``MODLIN_MEMORY``,
``MODLIN_THREADS``, ``MODLIN_PROGRESS``), read at the first product, else from the
machine. modlin's own worker threads run each task in a copy of the context that
started the product (:func:`modlin._engines.threads.run`), so a product obeys the limits
in force where it was called.
"""

from __future__ import annotations

import contextvars
import math
import numbers
import operator
import os
import re
import threading
from dataclasses import dataclass, replace
from functools import lru_cache

#: The default budget is a quarter of the physical memory, capped here.
DEFAULT_MEMORY_CAP = 4 * 2**30


_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9, "gb": 10**9,
          "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


#: The largest size :func:`parse_size` accepts: the largest int64. NumPy counts an array's
#: bytes in ``np.intp`` (int64), so no workspace can use more, and no machine holds it:
#: a larger size is refused here, with its name, rather than met later as an overflow.
MAX_SIZE = 2**63 - 1


_SIZE = re.compile(r"\s*(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]+))?(?:[eE](?P<exp>[+-]?[0-9]+))?\s*(?P<unit>[a-zA-Z]*)\s*")


#: Digits of the exponent beyond which a size is certainly out of range (or zero): 10**6
#: and more decimal places are far past both ends of ``[1, MAX_SIZE]`` bytes, whatever the
#: digits before it.
_EXP_DIGITS = 6


def _decimal_int(digits: str) -> int:
    """``int(digits)`` for decimal strings of any length (``int`` refuses more than
    ``sys.get_int_max_str_digits()``, 4300 by default; arithmetic has no such limit)."""
    n = 0
    for i in range(0, len(digits), 1000):
        chunk = digits[i:i + 1000]
        n = n * 10 ** len(chunk) + int(chunk)
    return n


def _string_size(size: str, what: str) -> int:
    """The bytes of a size string, exactly: its number times its unit, rounded down."""
    m = _SIZE.fullmatch(size)
    unit = m and _UNITS.get(m.group("unit").lower())
    shown = repr(size) if len(size) <= 60 else f"{size[:40]!r}... ({len(size)} characters)"
    if not m or unit is None or not (m.group("int") or m.group("frac")):
        raise ValueError(f"{what} = {shown} is not a size: write bytes as an int, or a number with a "
                         "unit such as '1.5GiB', '512MiB' or '2GB'")
    frac = m.group("frac") or ""
    # the number is int(digits) * 10**exp; never through float, which rounds (and overflows
    # to inf, or raises, past 1e308), nor through 10**exp of an unchecked exponent
    digits = (m.group("int") + frac).lstrip("0")
    exp_text = (m.group("exp") or "0").lstrip("+-").lstrip("0")
    negative = (m.group("exp") or "").startswith("-")
    too_large = ValueError(f"{what} = {shown} is too large: a size is at most {MAX_SIZE} bytes (2**63 - 1, "
                           "the largest int64)")
    below_byte = ValueError(f"{what} = {shown} is less than one byte: sizes are rounded down to whole "
                            "bytes, and must be at least 1")
    if not digits:
        raise ValueError(f"{what} must be positive, got {shown}")
    if len(exp_text) > _EXP_DIGITS:
        raise below_byte if negative else too_large
    stripped = digits.rstrip("0")
    exp = (-1 if negative else 1) * int(exp_text or "0") - len(frac) + (len(digits) - len(stripped))
    # the number lies in [10**(len - 1 + exp), 10**(len + exp)) and the unit in [1, 2**40]:
    # outside these bounds it is certainly out of range, and the exact product is not made
    if len(stripped) - 1 + exp >= 20:  # 10**20 > MAX_SIZE
        raise too_large
    if len(stripped) + exp <= -13:  # 10**-13 * 2**40 < 1
        raise below_byte
    n = _decimal_int(stripped) * unit
    value = n * 10**exp if exp >= 0 else n // 10**-exp  # rounded down to whole bytes
    if value > MAX_SIZE:
        raise too_large
    if value < 1:
        raise below_byte
    return value


def parse_size(size, what: str = "memory") -> int:
    """Bytes from an int or a string such as ``"1.5GiB"``, ``"512 MiB"``, ``"2G"`` or ``"1e9"``.

    Decimal units (kB, MB, GB, TB; also k, M, G, T) are powers of 1000, binary
    ones (KiB, MiB, GiB, TiB) powers of 1024. Strings are read exactly, never
    through a float: the number written times its unit, rounded down to whole
    bytes (``"1.5GiB"`` is 1610612736, ``"2.7B"`` is 2).

    Parameters
    ----------
    size : int or str
        Bytes as an int (Python's, or a NumPy integer), or a string.
    what : str
        The name of the setting, for the messages.

    Returns
    -------
    int
        The size in bytes, from 1 to :data:`MAX_SIZE` (``2**63 - 1``).

    Raises
    ------
    TypeError
        For anything but an int or a string (a bool or a float included).
    ValueError
        For a string that is not a size, and for a size below one byte (``"0.5B"``,
        zero, negative ones) or above :data:`MAX_SIZE`.
    """
    if isinstance(size, bool) or not isinstance(size, (numbers.Integral, str)):
        shown = repr(size) if isinstance(size, bool) else type(size).__name__
        raise TypeError(f"{what} must be a size in bytes (an int or a string like '1.5GiB'), not {shown}")
    if isinstance(size, str):
        return _string_size(size, what)
    value = operator.index(size)  # a NumPy integer as a Python int
    if value <= 0:
        raise ValueError(f"{what} must be positive, got {size!r}")
    if value > MAX_SIZE:
        raise ValueError(f"{what} = {value} is too large: a size is at most {MAX_SIZE} bytes (2**63 - 1, "
                         "the largest int64)")
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


def _cgroup_cpus() -> float | None:
    """The CPUs a container's CPU quota allows (cgroup v2 ``cpu.max``, v1 ``cfs_quota_us``), or None."""
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period = int(f.read())
        return None if quota <= 0 else quota / period
    except (OSError, ValueError):
        return None


@lru_cache(maxsize=1)
def available_cpus() -> int:
    """The cores this process may run on: its CPU affinity (``taskset``, a job scheduler's
    binding) and its container's CPU quota (rounded up), where they are fewer than the machine's.
    BLAS counts the machine's CPUs; a product on more threads than it may run shares cores
    with itself."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    quota = _cgroup_cpus()
    return max(1, min(n, math.ceil(quota))) if quota else max(1, n)


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
    except (TypeError, ValueError, OverflowError):  # OverflowError: int(float("inf"))
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
        and BLAS on one thread (see :mod:`modlin._engines.threads`).
    progress : bool
        Whether long products show a progress bar on standard error.
    """

    memory: int
    threads: int
    progress: bool


def _from_environment() -> Limits:
    env = os.environ
    memory = parse_size(env["MODLIN_MEMORY"], "MODLIN_MEMORY") if env.get("MODLIN_MEMORY") else default_memory()
    # BLAS' count, but no more than the cores this process may use (affinity, container quota)
    threads = (_threads(env["MODLIN_THREADS"], "MODLIN_THREADS") if env.get("MODLIN_THREADS")
               else min(blas_threads(), available_cpus()))
    return Limits(memory, threads, _flag(env.get("MODLIN_PROGRESS", ""), "MODLIN_PROGRESS"))


_lock = threading.Lock()


_default: list[Limits] = []  # the process' defaults, read at the first use


#: The limits :func:`limits` set in this context (thread, asyncio task), unset where none
#: were: a ContextVar, not a global, so that threads setting limits side by side never
#: restore each other's (with one process-wide value, two ``with`` blocks ending out of
#: order left the first one's budget in force for every later product).
_current: contextvars.ContextVar[Limits] = contextvars.ContextVar("modlin.limits")


def defaults() -> Limits:
    """The process' limits, where :func:`limits` set none: from the environment, else the
    machine (read once, at the first use)."""
    if not _default:
        with _lock:
            if not _default:
                _default.append(_from_environment())
    return _default[0]


def current() -> Limits:
    """The limits in force in this thread (context): those :func:`limits` set here, else
    the process' defaults (from the environment or the machine)."""
    lim = _current.get(None)
    return defaults() if lim is None else lim


class limits:
    """Set the memory budget, threads and progress display of the modlin products made in
    this thread.

    Applies at once (like ``threadpoolctl.threadpool_limits``), to the current thread,
    or more exactly the current :mod:`contextvars` context (an asyncio task has its own);
    used as a context manager, it restores the previous limits on exit. Arguments left
    as None keep their current value. A product obeys the limits in force where it is
    called, also in the worker threads it runs on.

    Threads you start begin with the process' defaults (from the environment, else the
    machine), not the limits of the thread that starts them (free-threaded Python 3.14,
    and ``-X thread_inherit_context=1``, give new threads a copy of the starter's context
    instead). To carry the limits into a thread, run it in a copy of the context, as
    in the last example.

    Parameters
    ----------
    memory : int or str, optional
        Working memory a product may use beyond its operands and result: bytes,
        or a string such as ``"1.5GiB"`` (read exactly, rounded down to bytes; see
        :func:`parse_size`). Products larger than this are computed tile by tile
        (see :meth:`Plan.explain <modlin.Plan.explain>`). Default:
        ``$MODLIN_MEMORY``, else a quarter of the physical memory, at most 4 GiB.
    threads : int, optional
        Cores a product runs on, BLAS' threads included. With more than one,
        a large product's rows are split across that many worker threads, each
        running its GEMMs with BLAS on one thread and its element-wise passes
        beside them; smaller ones run on the calling thread, their GEMMs on at
        most ``threads`` BLAS threads (one for small GEMMs, where a BLAS worker
        another process has descheduled would cost more than it saves). With
        one, everything runs on the calling thread and BLAS on one thread.
        Results are the same for any value. Default: ``$MODLIN_THREADS``, else
        the threads BLAS uses, but no more than the cores this process may run
        on (its CPU affinity and its container's CPU quota).
    progress : bool, optional
        Show a progress bar on standard error for products and
        :mod:`modlin.linalg` calls expected to take more than about two
        seconds (one bar per call: the products inside a linalg call show
        none of their own). Default: ``$MODLIN_PROGRESS``, else off.

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

    A thread of your own, under the limits of the code that starts it:

    >>> import contextvars, threading
    >>> seen = []
    >>> with modlin.limits(memory="64MiB"):
    ...     ctx = contextvars.copy_context()
    ...     t = threading.Thread(target=ctx.run, args=(lambda: seen.append(modlin.limits.current().memory),))
    ...     t.start(); t.join()
    >>> seen
    [67108864]
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
        self._limits = new
        self._token: contextvars.Token | None = _current.set(new)

    def restore(self) -> None:
        """Put back the limits that were in force, in this thread, before this call.

        Once only: a second call does nothing.

        Raises
        ------
        RuntimeError
            In another thread (contextvars context) than the one that made the call;
            nothing is changed then, and the call can still be restored where it was made.
        """
        if self._token is None:
            return
        try:
            _current.reset(self._token)
        except ValueError:  # the token belongs to another context
            raise RuntimeError("modlin.limits(...).restore() must run in the thread (contextvars context) "
                               "that set these limits; limits set in one thread apply to that thread only, "
                               "and nothing was changed here") from None
        self._token = None

    def __enter__(self) -> "limits":
        return self

    def __exit__(self, *exc) -> None:
        self.restore()

    def __repr__(self) -> str:
        lim = self._limits
        return f"modlin.limits(memory={format_size(lim.memory)!r}, threads={lim.threads}, progress={lim.progress})"
