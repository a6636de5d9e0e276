"""A CuPy stand-in that runs modlin's GPU code paths on the host, and a traffic ledger.

No GPU here, so the stand-in plays CuPy:

* :class:`FakeCupyArray`, a NumPy array subclass that modlin takes for ``cupy.ndarray``
  (it is recognised through ``sys.modules["cupy"]``), whose operations behave as CuPy's
  do where that matters to modlin: reductions and ``count_nonzero`` give 0-d arrays on
  the "device", not host scalars, so reading their value is a visible host sync;
* :class:`FakeCupy`, a module forwarding every ``cupy.*`` call to NumPy (``cupy.empty``
  hands out memory filled with :data:`POISON`, as ``cudaMalloc`` hands out garbage);
* the kernels of ``kernels/modlin_kernels.cu`` run by their host twins
  (``tests/kernels_harness.cu``, built by ``conftest.build_harness``);
* cuBLAS's ``gemmEx`` / ``gemmStridedBatchedEx`` (a ``cupy_backends.cuda.libs.cublas``
  stand-in): the int8 GEMM computed exactly from the raw pointers, leading dimensions and
  strides that :func:`modlin._engines.cuda.gemm_i8` passes, asserting every int32 sum fits. So
  ``gemm_i8`` itself runs (its padding, its transposed copy of ``B``, its column-major
  argument swap), not a replacement of it.

:func:`install` puts it in place (with pytest's ``monkeypatch`` or a :class:`Patcher`)
and returns ``to_gpu``, which puts host arrays on the "device".

The ledger
----------
``to_gpu.ledger`` (a :class:`Ledger`) counts, inside ``with to_gpu.ledger:``, everything
the code run there asks of the device, one :class:`Record` ``(kind, name, bytes_read,
bytes_written)`` each, with the modlin functions that asked (``stack``):

``"launch"``
    A kernel of ``kernels/`` (:func:`modlin._engines.cuda.launch` with ``n > 0``). Bytes come from
    its array arguments, not from a per-kernel formula: the arguments are compared before
    and after the call, and an argument whose bytes changed was *written*, one that did
    not was *read*. A kernel writing an output does not read it, so that output counts
    as written only; the kernels that update an argument in place (:data:`IN_PLACE`, read
    from ``kernels/modlin_kernels.cu``, checked by ``tests/test_gpu_ledger.py``) have it
    counted as both. Outputs come from ``cupy.empty``, whose poison makes a change certain.
    Where an output is written over an input's memory (both change), the earlier
    argument is the input (the kernels take their inputs first).
``"gemm"``
    A cuBLAS int8 GEMM call: bytes of ``A`` and ``B`` read, of ``C`` written, and ``work``,
    the multiply-adds ``batch * m * k * n`` (padded as cuBLAS sees them). Reported apart
    from the other bytes.
``"cupy"``
    A CuPy operation on device arrays: a ufunc (``__array_ufunc__``, reductions
    included), a NumPy/CuPy function (``__array_function__`` or a ``cupy.*`` call), a
    method making a new array (``astype``, ``copy``, ``reshape`` when it copies, ...),
    ``__setitem__`` (a copy into a view, a fill, a scatter) and ``__getitem__`` with
    array or list indexes (a gather). Bytes read are the device inputs', bytes written
    the outputs'. An array counts its distinct elements once (a broadcast view its
    source's bytes). Views (basic slicing, ``.T``, ``reshape`` without a copy,
    ``broadcast_to``, ``astype(copy=False)`` of the same dtype, ...) and allocations
    (``cupy.empty``) launch nothing and are not recorded; ``cupy.zeros`` and friends
    write their bytes.
``"sync"``
    A device-to-host read, which waits for the device: ``.get()``, ``cupy.asnumpy``,
    ``.item()``, ``.tolist()``, ``bool()``, ``int()``, ``float()``, ``complex()``,
    ``operator.index()`` of a device array, and operations whose result's size depends on
    the data (``nonzero``, boolean-mask gathers, ``unique``...). Bytes: those brought back.
``"upload"``
    A host-to-device copy: ``cupy.asarray`` (``array``, ``ascontiguousarray``...) of host
    data, a host array or list used as an index or operand of a device operation.

Not seen: ``numpy.asarray(x)`` of a device array in modlin's code (real CuPy refuses it),
and a host read hidden in a NumPy call the stand-in makes on modlin's behalf (a 0-d
device array passed as a shape).

:meth:`Ledger.summary` adds the records up: launches (kernels and CuPy operations), GEMM
calls, host syncs, uploads, non-GEMM bytes (kernels' and CuPy operations') and GEMM bytes,
per output entry.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import operator
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

__all__ = ["FakeCupyArray", "FakeCupy", "Ledger", "Record", "Patcher", "install", "set_device_memory", "footprint",
           "IN_PLACE", "POISON"]

#: The byte ``cupy.empty`` fills new arrays with: device memory is not zeroed, and code
#: reading what it never wrote must not get lucky zeros (nor must a kernel's output
#: happen to equal what it overwrites, which would hide the write from the ledger).
POISON = 0xA5

#: Kernels that update array arguments in place (argument positions): those are read
#: and written. The kernels' sources say which pointers they write (not ``const``);
#: of those, these are also read (``mw_step``: ``x <- red2(scale * red1(x)) + redt(t)``).
IN_PLACE: dict[str, tuple[int, ...]] = {"mw_step": (0,), "accurate_rows": (3,), "accurate_cols": (4,),
                                        "bits_scales": (14,)}  # summary[2:] after fast_scales' [:2]

KINDS = ("launch", "gemm", "cupy", "sync", "upload")


# ----------------------------------------------------------------------------- the ledger

@dataclasses.dataclass(frozen=True)
class Record:
    """One thing asked of the device.

    Attributes
    ----------
    kind : str
        One of :data:`KINDS`.
    name : str
        The kernel, cuBLAS call, CuPy operation or host read.
    bytes_read, bytes_written : int
        Device memory read and written (for ``"sync"`` and ``"upload"``: bytes moved).
    work : int
        Multiply-adds of a GEMM call (0 otherwise).
    stack : tuple of str
        The modlin functions that asked for it, innermost first (``module.qualname``).
    roles : tuple of str
        A kernel launch's arguments in order: ``"r"`` (an array read), ``"w"`` (written),
        ``"rw"`` (updated in place), ``""`` (a scalar, or the NULL of an absent operand);
        empty for other records.
    """

    kind: str
    name: str
    bytes_read: int
    bytes_written: int
    work: int = 0
    stack: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()

    @property
    def site(self) -> str:
        """The innermost modlin function that asked for it ('' when none did)."""
        return self.stack[0] if self.stack else ""


class Ledger:
    """The device traffic of the code run inside ``with ledger:`` (see the module's docstring).

    Entering resets it and starts recording; leaving stops recording and keeps the
    records (:attr:`records`), so that reading the result afterwards is not counted.
    """

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.recording = False

    def __enter__(self) -> Ledger:
        self.reset()
        self.recording = True
        return self

    def __exit__(self, *exc) -> None:
        self.recording = False

    def reset(self) -> None:
        """Forget every record."""
        self.records = []

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Record nothing inside (a test's own device work within a measured block)."""
        was, self.recording = self.recording, False
        try:
            yield
        finally:
            self.recording = was

    def add(self, kind: str, name: str, read: int = 0, written: int = 0, work: int = 0,
            roles: tuple[str, ...] = ()) -> None:
        """Record one thing asked of the device, with the modlin functions that asked."""
        assert kind in KINDS, kind
        self.records.append(Record(kind, name, int(read), int(written), int(work), _modlin_stack(), roles))

    def of(self, kind: str) -> list[Record]:
        """The records of one kind."""
        return [r for r in self.records if r.kind == kind]

    def by(self, key: Callable[[Record], str], kinds: Iterable[str] = ("launch", "cupy")) -> dict[str, dict]:
        """The records of ``kinds`` grouped by ``key(record)``: per group its count and bytes
        (read plus written), largest first."""
        groups: dict[str, dict] = {}
        for r in self.records:
            if r.kind in kinds:
                g = groups.setdefault(key(r), {"count": 0, "bytes": 0})
                g["count"] += 1
                g["bytes"] += r.bytes_read + r.bytes_written
        return dict(sorted(groups.items(), key=lambda kv: -kv[1]["bytes"]))

    def summary(self, entries: int, records: Iterable[Record] | None = None) -> dict[str, float]:
        """The records added up, bytes also per output entry (``entries``: the product's
        entries, a complex or Gaussian entry counting once).

        Returns
        -------
        dict
            ``kernels`` (modlin's kernel launches), ``cupy_ops``, ``launches`` (the two:
            every non-GEMM kernel the device runs), ``gemms`` (cuBLAS calls), ``gemm_work``
            (multiply-adds), ``syncs``, ``uploads``, ``non_gemm_bytes`` (kernels' and CuPy
            operations' bytes read and written), ``gemm_bytes``, ``sync_bytes``,
            ``upload_bytes``, and per output entry ``bytes_per_entry`` (non-GEMM bytes; of
            them ``kernel_bytes_per_entry`` and ``cupy_bytes_per_entry``) and
            ``gemm_bytes_per_entry``.
        """
        rs = list(self.records if records is None else records)

        def count(kind):
            return sum(r.kind == kind for r in rs)

        def moved(*kinds):
            return sum(r.bytes_read + r.bytes_written for r in rs if r.kind in kinds)

        out = {"kernels": count("launch"), "cupy_ops": count("cupy"), "gemms": count("gemm"),
               "gemm_work": sum(r.work for r in rs), "syncs": count("sync"), "uploads": count("upload"),
               "non_gemm_bytes": moved("launch", "cupy"), "gemm_bytes": moved("gemm"),
               "sync_bytes": moved("sync"), "upload_bytes": moved("upload")}
        out["launches"] = out["kernels"] + out["cupy_ops"]
        per = max(entries, 1)
        out["bytes_per_entry"] = out["non_gemm_bytes"] / per
        out["kernel_bytes_per_entry"] = moved("launch") / per
        out["cupy_bytes_per_entry"] = moved("cupy") / per
        out["gemm_bytes_per_entry"] = out["gemm_bytes"] / per
        return out


#: The ledger of the stand-in in place (set by :func:`install`, undone with it).
_active: Ledger | None = None
#: Depth of the stand-in's own NumPy work: nothing is recorded inside it (an operation
#: is recorded once, by the outermost hook, not again by the NumPy calls it makes).
_guard = threading.local()


def _inside() -> bool:
    return getattr(_guard, "depth", 0) > 0


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    _guard.depth = getattr(_guard, "depth", 0) + 1
    try:
        yield
    finally:
        _guard.depth -= 1


def _recording() -> bool:
    return _active is not None and _active.recording and not _inside()


def _record(kind: str, name: str, read: int = 0, written: int = 0, work: int = 0,
            roles: tuple[str, ...] = ()) -> None:
    if _recording():
        _active.add(kind, name, read, written, work, roles)


def _modlin_stack() -> tuple[str, ...]:
    """The modlin functions on the call stack, innermost first."""
    out, f = [], sys._getframe(1)
    while f is not None:
        mod = f.f_globals.get("__name__", "")
        if mod == "modlin" or mod.startswith("modlin."):
            out.append(f"{mod}.{f.f_code.co_qualname}")
        f = f.f_back
    return tuple(out)


def footprint(a: np.ndarray) -> int:
    """Bytes of ``a``'s distinct elements: its ``nbytes``, except that a broadcast (zero
    stride) axis counts once, as a kernel reading it reads its source once from memory."""
    n = a.itemsize
    for size, stride in zip(a.shape, a.strides):
        if size == 0:
            return 0
        if stride != 0:
            n *= size
    return n


# ----------------------------------------------------------------------------- device arrays

class _Pointer:
    """``cupy.ndarray.data``: a device pointer (``.ptr``), here a host address."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


def _unwrap(obj, seen: dict[int, tuple]):
    """``obj`` with every device array replaced by a plain NumPy view of it (in tuples,
    lists and dicts too); ``seen`` maps each view's id to ``(view, the device array)``."""
    if isinstance(obj, FakeCupyArray):
        view = obj.view(np.ndarray)
        seen[id(view)] = (view, obj)
        return view
    if isinstance(obj, (tuple, list)):
        return type(obj)(_unwrap(v, seen) for v in obj)
    if isinstance(obj, dict):
        return {k: _unwrap(v, seen) for k, v in obj.items()}
    return obj


def _wrap(obj, seen: dict[int, tuple] | None = None):
    """A result on the device: NumPy arrays as :class:`FakeCupyArray` (an unwrapped input
    given back, e.g. ``out=``, as the device array itself), NumPy scalars as 0-d arrays
    (CuPy's reductions stay on the device)."""
    if isinstance(obj, np.ndarray):
        if seen is not None and id(obj) in seen and seen[id(obj)][0] is obj:
            return seen[id(obj)][1]
        return obj if isinstance(obj, FakeCupyArray) else obj.view(FakeCupyArray)
    if isinstance(obj, np.generic):
        return np.asarray(obj).view(FakeCupyArray)
    if isinstance(obj, tuple):
        return tuple(_wrap(v, seen) for v in obj)
    if isinstance(obj, list):
        return [_wrap(v, seen) for v in obj]
    return obj


def _device_scalars(obj, python: bool):
    """NumPy scalars in a result (top level or in a tuple) as 0-d arrays; Python scalars
    too with ``python`` (functions CuPy keeps on the device but NumPy returns as Python's)."""
    if isinstance(obj, np.generic) or (python and isinstance(obj, (bool, int, float))):
        return np.asarray(obj)
    if isinstance(obj, tuple):
        return tuple(_device_scalars(v, python) for v in obj)
    return obj


def _arrays(obj) -> Iterator[np.ndarray]:
    """The NumPy arrays in ``obj`` (nested in tuples, lists and dict values)."""
    if isinstance(obj, np.ndarray):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for v in obj:
            yield from _arrays(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _arrays(v)


def _host_data(obj, seen: dict[int, tuple], lists: bool) -> list:
    """Host arrays in an operand, and with ``lists`` lists of numbers (a ufunc's operands;
    elsewhere a list may be axes or a shape): what CuPy would have to upload. ``seen``'s
    arrays are on the device."""
    if isinstance(obj, np.ndarray):
        return [] if id(obj) in seen else [obj]
    if isinstance(obj, (list, tuple)) and any(isinstance(v, (np.ndarray, list, tuple)) for v in obj):
        return [x for v in obj for x in _host_data(v, seen, lists)]
    if lists and isinstance(obj, list) and obj:
        return [obj]
    return []


def _host_bytes(x) -> int:
    return x.nbytes if isinstance(x, np.ndarray) else np.asarray(x).nbytes


#: Functions whose first argument is written (they return None).
_OUT_FIRST = {"copyto", "place", "put", "putmask", "fill_diagonal"}
#: Functions that do not read their array argument (only its shape and dtype).
_WRITE_ONLY = {"zeros_like", "ones_like", "full_like", "empty_like"}
#: Functions returning Python scalars on NumPy that CuPy keeps on the device (0-d arrays).
_DEVICE_SCALARS = {"count_nonzero", "array_equal", "array_equiv", "allclose"}
#: Products CuPy hands to cuBLAS.
_GEMMS = {"matmul", "dot"}
#: Operations whose result's size depends on the data: CuPy reads a count back first.
_SIZED_BY_DATA = {"nonzero", "argwhere", "flatnonzero", "unique", "extract", "compress"}


def _device_call(name: str, func: Callable, args: tuple, kwargs: dict, ufunc: bool = False):
    """``func(*args, **kwargs)`` on plain NumPy views of the device arrays, the result put
    back on the device, and recorded: a CuPy operation (unless the result is a view of an
    input), an upload of any host array it had to take along, a sync where the result's
    size depends on the data."""
    seen: dict[int, tuple] = {}
    pargs, pkwargs = _unwrap(args, seen), _unwrap(kwargs, seen)
    with _quiet():
        result = func(*pargs, **pkwargs)
    if name == "empty_like":  # an allocation: no kernel, no bytes, garbage inside
        _poison(result)
        return _wrap(result)
    if seen:  # a scalar computed from device data stays there: a 0-d array, as in CuPy
        result = _device_scalars(result, name in _DEVICE_SCALARS)
    out = _wrap(result, seen)
    if not _recording():
        return out
    device = [v for v, _ in seen.values()]
    outs = list(_arrays(result))
    given = list(_arrays(pkwargs.get("out")))
    if name in _OUT_FIRST and pargs and isinstance(pargs[0], np.ndarray):
        given.append(pargs[0])
    if not ufunc:  # results sharing an input's memory are views of it (``out=`` excepted)
        outs = [o for o in outs if any(o is g for g in given)
                or not any(np.may_share_memory(o, d) for d in device)]
        outs += [g for g in given if not any(g is o for o in outs)]
        if not outs and name not in _SIZED_BY_DATA:
            return out  # a view, or metadata (a shape, a dtype): nothing runs on the device
    inputs = [a for a in _arrays((pargs, {k: v for k, v in pkwargs.items() if k != "out"}))
              if id(a) in seen and not any(a is g for g in given if name in _OUT_FIRST)]
    if not inputs and not outs:
        return out
    for host in (x for a in pargs for x in _host_data(a, seen, ufunc)):
        _record("upload", f"{name} (host operand)", 0, _host_bytes(host))  # CuPy would copy it over first
    read = 0 if name in _WRITE_ONLY else sum(footprint(a) for a in inputs)
    written = sum(footprint(o) for o in outs)
    if all(a.size == 0 for a in inputs + outs):
        return out
    if name in _GEMMS and len(inputs) == 2:  # cuBLAS (DGEMM, ZGEMM...), not an element-wise pass
        x, y = inputs
        _record("gemm", f"{name} ({x.dtype})", read, written, np.prod(outs[0].shape) * x.shape[-1])
        return out
    _record("cupy", name, read, written)
    if name in _SIZED_BY_DATA or (name == "where" and len(pargs) == 1):
        _record("sync", f"{name} (result size)", 8)
    return out


def _advanced(key) -> bool:
    """Whether an index is NumPy's advanced indexing (arrays, lists, booleans): a gather
    or scatter kernel, not a view."""
    items = key if isinstance(key, tuple) else (key,)
    return any(isinstance(e, (list, bool, np.bool_)) or (isinstance(e, np.ndarray) and e.ndim > 0) for e in items)


def _index_traffic(key, seen: dict[int, tuple], what: str) -> int:
    """Record what an index costs beyond the gather or scatter itself (host index arrays
    and lists uploaded, a boolean mask's count read back, a 0-d device integer read
    back); return the device index arrays' bytes read."""
    read = 0
    for e in key if isinstance(key, tuple) else (key,):
        if isinstance(e, np.ndarray) and id(e) in seen:
            if e.ndim == 0:
                _record("sync", f"{what} (0-d device index)", e.itemsize)
            else:
                read += footprint(e)
                if e.dtype == bool and what == "getitem":
                    _record("sync", "getitem (boolean mask: result size)", 8)
        elif isinstance(e, (list, np.ndarray)) and np.ndim(e) > 0:
            _record("upload", f"{what} (host index)", 0, _host_bytes(e))
    return read


def _with_ellipsis(key):
    """``key`` indexing the same entry but as a 0-d view, not a scalar."""
    items = key if isinstance(key, tuple) else (key,)
    return items if any(e is Ellipsis for e in items) else items + (Ellipsis,)


def _poison(x) -> None:
    """Fill a new array with :data:`POISON`, as device memory is handed out holding garbage."""
    if isinstance(x, np.ndarray) and x.nbytes:
        ctypes.memset(x.ctypes.data, POISON, x.nbytes)


def _sync(name: str, nbytes: int) -> None:
    _record("sync", name, nbytes)


class FakeCupyArray(np.ndarray):
    """A host array standing in for a ``cupy.ndarray`` (its operations recorded in the
    ledger of the stand-in in place; see the module's docstring)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        func = ufunc if method == "__call__" else getattr(ufunc, method)
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        return _device_call(name, func, inputs, kwargs, ufunc=True)

    def __array_function__(self, func, types, args, kwargs):
        return _device_call(func.__name__, func, args, kwargs)

    @property
    def data(self) -> _Pointer:
        """The device pointer (``.data.ptr``) cuBLAS calls take."""
        return _Pointer(self.ctypes.data)

    # -- device to host: syncs
    def get(self, stream=None, order="C", out=None) -> np.ndarray:
        _sync("get", self.nbytes)
        return np.array(self.view(np.ndarray))

    def item(self, *args):
        _sync("item", self.itemsize)
        return self.view(np.ndarray).item(*args)

    def tolist(self):
        _sync("tolist", self.nbytes)
        return self.view(np.ndarray).tolist()

    def __bool__(self) -> bool:
        _sync("bool", self.itemsize)
        return bool(self.view(np.ndarray))

    def __int__(self) -> int:
        _sync("int", self.itemsize)
        return int(self.view(np.ndarray))

    def __float__(self) -> float:
        _sync("float", self.itemsize)
        return float(self.view(np.ndarray))

    def __complex__(self) -> complex:
        _sync("complex", self.itemsize)
        return complex(self.view(np.ndarray))

    def __index__(self) -> int:
        _sync("index", self.itemsize)
        return operator.index(self.view(np.ndarray))

    # -- indexing: views are free, gathers and scatters are kernels
    def __iter__(self):
        # CuPy yields 0-d device arrays (NumPy's iterator would hand out host scalars unseen)
        for i in range(len(self)):
            yield self[i]

    def __getitem__(self, key):
        plain = self.view(np.ndarray)
        seen: dict[int, tuple] = {}
        k = _unwrap(key, seen)
        with _quiet():
            res = plain[k]
            if isinstance(res, np.generic):  # CuPy gives a 0-d view, not a host scalar
                res = plain[_with_ellipsis(k)]
        if not _advanced(k):
            _index_traffic(k, seen, "getitem")  # a 0-d device index: read back
            return res.view(FakeCupyArray)
        if _recording():
            read = _index_traffic(k, seen, "getitem")
            _record("cupy", "getitem (gather)", read + footprint(res), footprint(res))
        return res.view(FakeCupyArray)

    def __setitem__(self, key, value):
        plain = self.view(np.ndarray)
        seen: dict[int, tuple] = {}
        k, v = _unwrap(key, seen), _unwrap(value, seen)
        with _quiet():
            plain[k] = v
        if not _recording():
            return
        advanced = _advanced(k)
        with _quiet():
            target = plain[k]  # the entries written (a view, or a gathered copy of them)
        basic_view = isinstance(target, np.ndarray) and not advanced
        written = footprint(target) if basic_view else np.size(target) * self.itemsize
        read = _index_traffic(k, seen, "setitem")
        if isinstance(v, np.ndarray) and id(v) in seen:
            read += footprint(v)
        elif isinstance(v, (np.ndarray, list)) and np.size(v) > 1:
            _record("upload", "setitem (host value)", 0, _host_bytes(v))
        _record("cupy", "setitem (scatter)" if advanced else "setitem", read, written)

    @property
    def real(self):
        return np.ndarray.real.__get__(self)

    @real.setter
    def real(self, value):
        self.real[...] = value  # a copy into the view: recorded as such

    @property
    def imag(self):
        return np.ndarray.imag.__get__(self)

    @imag.setter
    def imag(self, value):
        self.imag[...] = value

    def fill(self, value) -> None:
        self[...] = value


def _method(name: str) -> Callable:
    """A method making a new array (or a view): through :func:`_device_call`."""
    base = getattr(np.ndarray, name)

    @functools.wraps(base)
    def method(self, *args, **kwargs):
        return _device_call(name, base, (self,) + args, kwargs)

    # not NumPy's docstring: its examples would run as doctests of this module
    method.__doc__ = f"``numpy.ndarray.{name}``, recorded as a device operation."
    return method


# ndarray methods implemented in C without NumPy's dispatch (reductions such as max, sum
# and any reach __array_ufunc__ by themselves)
for _name in ("astype", "copy", "reshape", "ravel", "flatten", "nonzero", "argmax", "argmin", "cumsum",
              "cumprod", "dot", "take", "repeat", "round", "compress", "searchsorted", "squeeze", "diagonal",
              "transpose", "swapaxes"):
    setattr(FakeCupyArray, _name, _method(_name))
del _name


# ----------------------------------------------------------------------------- the cupy module

class _Namespace(types.SimpleNamespace):
    """``cupy.cuda``: the stand-in's own members (``device.get_cublas_handle``) kept when a
    test assigns ``cupy.cuda`` a namespace of its own (its members are added instead)."""


#: ``cupy.*`` functions copying host data to the device.
_UPLOADERS = {"asarray", "array", "ascontiguousarray", "asfortranarray", "asanyarray"}


class FakeCupy(types.ModuleType):
    """``cupy``: every attribute NumPy's, functions running through the stand-in (see the
    module's docstring), ``asnumpy``, and ``cuda`` (no ``Device`` until
    :func:`set_device_memory` gives one: :func:`modlin._planning.tiling.budget` then falls back to
    the host budget)."""

    ndarray = FakeCupyArray

    def __init__(self) -> None:
        super().__init__("cupy")
        self.__dict__["_cuda"] = _Namespace(device=types.SimpleNamespace(get_cublas_handle=lambda: 0))

    @property
    def cuda(self) -> _Namespace:
        return self.__dict__["_cuda"]

    @cuda.setter
    def cuda(self, value) -> None:
        vars(self.__dict__["_cuda"]).update(vars(value))

    @staticmethod
    def asnumpy(x, stream=None, order="C", out=None) -> np.ndarray:
        if isinstance(x, FakeCupyArray):
            return x.get()
        return np.asarray(x)

    def __getattr__(self, name: str):
        obj = getattr(np, name)
        if not callable(obj) or isinstance(obj, (type, np.ufunc)):
            return obj  # dtypes, constants; ufuncs dispatch to FakeCupyArray themselves
        return _module_function(name, obj)


@functools.lru_cache(maxsize=None)
def _module_function(name: str, func: Callable) -> Callable:
    """``cupy.<name>``: NumPy's ``func`` on the device."""

    @functools.wraps(func)
    def call(*args, **kwargs):
        seen: dict[int, tuple] = {}
        _unwrap((args, kwargs), seen)
        if seen and name != "empty_like":
            return _device_call(name, func, args, kwargs)
        with _quiet():
            result = func(*_unwrap(args, {}), **_unwrap(kwargs, {}))
        if name in ("empty", "empty_like"):  # an allocation: no kernel, no bytes, garbage inside
            _poison(result)
        elif isinstance(result, np.ndarray) and result.size:
            if name in _UPLOADERS:
                _record("upload", name, 0, result.nbytes)
            else:  # made on the device (zeros, full, arange...): written
                _record("cupy", name, 0, footprint(result))
        return _wrap(result)

    return call


# ----------------------------------------------------------------------------- cuBLAS

CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
#: cudaDataType codes of the operands cuBLAS' int8 GEMMs take and give.
_CUDA_TYPES = {3: (np.int8, ctypes.c_int8), 10: (np.int32, ctypes.c_int32)}


def _operand(ptr: int, code: int, rows: int, cols: int, ld: int, trans: bool, batch: int, stride: int):
    """``op(X)`` (``batch x rows x cols``) of a column-major operand at ``ptr``: stored
    ``rows x cols`` (``cols x rows`` when transposed) with leading dimension ``ld``, the
    matrices ``stride`` elements apart."""
    dtype, ctype = _CUDA_TYPES[code]
    sr, sc = (cols, rows) if trans else (rows, cols)
    assert ld >= max(sr, 1), f"leading dimension {ld} below {sr}"
    if dtype == np.int8:
        assert ld % 4 == 0, f"int8 GEMMs take leading dimensions that are multiples of 4, got {ld}"
    span = (batch - 1) * stride + (sc - 1) * ld + sr if sr and sc else 0
    buf = np.ctypeslib.as_array((ctype * max(span, 1)).from_address(ptr))
    item = np.dtype(dtype).itemsize
    x = np.lib.stride_tricks.as_strided(buf, shape=(batch, sr, sc), strides=(stride * item, item, ld * item))
    return x.swapaxes(1, 2) if trans else x


def _gemm(name, transa, transb, m, n, k, alpha, A, atype, lda, stride_a, B, btype, ldb, stride_b, beta, C, ctype,
          ldc, stride_c, batch, compute, algo) -> None:
    """``C = alpha op(A) op(B) + beta C`` (column-major, int8 in, int32 out, exact): what
    cuBLAS computes, checked that every sum fits in int32."""
    from modlin._engines import cuda as _cuda

    assert (atype, btype, ctype, compute) == (_cuda.CUDA_R_8I, _cuda.CUDA_R_8I, _cuda.CUDA_R_32I,
                                              _cuda.CUBLAS_COMPUTE_32I), (atype, btype, ctype, compute)
    a = _operand(A, atype, m, k, lda, transa == CUBLAS_OP_T, batch, stride_a)
    b = _operand(B, btype, k, n, ldb, transb == CUBLAS_OP_T, batch, stride_b)
    c = _operand(C, ctype, m, n, ldc, False, batch, stride_c)
    al, be = ctypes.c_int32.from_address(alpha).value, ctypes.c_int32.from_address(beta).value
    # float64 sums of int8 products are exact while k * 2**14 < 2**53
    assert k < 2**39
    with _quiet():
        for i in range(batch):  # matrix by matrix: the emulation's copies are one matrix's
            prod = al * (a[i].astype(np.float64) @ b[i].astype(np.float64))
            if be:
                prod += be * c[i]
            assert np.abs(prod).max(initial=0) < 2**31, "an int32 sum of the int8 engine would overflow"
            c[i] = prod
    _record("gemm", name, batch * (m * k + k * n) + (batch * m * n * 4 if be else 0), batch * m * n * 4,
            batch * m * n * k)


def _cublas() -> types.ModuleType:
    """``cupy_backends.cuda.libs.cublas``: the int8 GEMM calls of :func:`modlin._engines.cuda.gemm_i8`."""
    mod = types.ModuleType("cupy_backends.cuda.libs.cublas")
    mod.CUBLAS_OP_N, mod.CUBLAS_OP_T = CUBLAS_OP_N, CUBLAS_OP_T

    def gemmEx(handle, transa, transb, m, n, k, alpha, A, atype, lda, B, btype, ldb, beta, C, ctype, ldc,
               compute, algo):
        _gemm("gemmEx", transa, transb, m, n, k, alpha, A, atype, lda, 0, B, btype, ldb, 0, beta, C, ctype, ldc,
              0, 1, compute, algo)

    def gemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, atype, lda, stride_a, B, btype, ldb,
                             stride_b, beta, C, ctype, ldc, stride_c, batch, compute, algo):
        _gemm("gemmStridedBatchedEx", transa, transb, m, n, k, alpha, A, atype, lda, stride_a, B, btype, ldb,
              stride_b, beta, C, ctype, ldc, stride_c, batch, compute, algo)

    mod.gemmEx, mod.gemmStridedBatchedEx = gemmEx, gemmStridedBatchedEx
    return mod


# ----------------------------------------------------------------------------- kernels

def _arg(a, ctype):
    """A kernel argument as the host harness takes it: a pointer, NULL, or a sized scalar."""
    if ctype is ctypes.c_void_p:
        if isinstance(a, np.uint64) and a == 0:
            return None  # the NULL pointer of an absent operand
        # a view's address is that of its first entry (CuPy passes data.ptr): kernels given
        # strided views take their strides as arguments, but each row must be contiguous
        # (or hold a complex array's parts: a complex tile's real or imaginary part)
        assert isinstance(a, np.ndarray) and (a.shape[-1:] in ((), (1,)) or a.strides[-1] in (a.itemsize,
                                                                                            2 * a.itemsize)), \
            "kernels take arrays whose rows are contiguous (or a complex array's parts)"
        return a.ctypes.data
    assert isinstance(a, np.generic), f"scalar kernel arguments must be NumPy scalars (sized), got {a!r}"
    return a.item()


def _launcher(harness, launched: list[str]) -> Callable:
    """:func:`modlin._engines.cuda.launch` on the host harness, recorded with the bytes of the array
    arguments it reads and writes (the rule of :data:`IN_PLACE` and the module's docstring)."""

    def launch(name: str, n: int, *args, shape=None, tiled: bool = False, grid=None) -> None:
        # the geometry (shape, tiled, grid) is the GPU's: the host twins loop over everything
        launched.append(name)
        if not n:
            return
        fn = getattr(harness, name)
        assert len(args) == len(fn.argtypes), name
        arrays = [(i, a) for i, a in enumerate(args) if isinstance(a, np.ndarray)]
        recording = _recording()
        before = [a.tobytes() for _, a in arrays] if recording else []
        fn(*[_arg(a, t) for a, t in zip(args, fn.argtypes)])
        if recording:
            roles = [("rw" if i in IN_PLACE.get(name, ()) else "w" if a.tobytes() != old else "r")
                     for (i, a), old in zip(arrays, before)]
            # an output written over an input's memory (a kernel finishing in place) changes
            # both: the kernels take their inputs first, so the earlier of the two was read
            for j, (_, a) in enumerate(arrays):
                for i in range(j):
                    if roles[i] == roles[j] == "w" and np.may_share_memory(arrays[i][1], a):
                        roles[i] = "r"
            read = sum(footprint(a) for (_, a), role in zip(arrays, roles) if "r" in role)
            written = sum(footprint(a) for (_, a), role in zip(arrays, roles) if "w" in role)
            by_position = dict(zip((i for i, _ in arrays), roles))
            _record("launch", name, read, written, roles=tuple(by_position.get(i, "") for i in range(len(args))))

    return launch


# ----------------------------------------------------------------------------- installing it

_MISSING = object()


class Patcher:
    """pytest's ``monkeypatch.setattr`` and ``setitem`` outside pytest, undone on exit."""

    def __init__(self) -> None:
        self._undo: list[Callable[[], None]] = []

    def setattr(self, obj, name: str, value) -> None:
        old = getattr(obj, name, _MISSING)
        self._undo.append(lambda: delattr(obj, name) if old is _MISSING else setattr(obj, name, old))
        setattr(obj, name, value)

    def setitem(self, mapping, key, value) -> None:
        old = mapping.get(key, _MISSING)
        self._undo.append(lambda: mapping.pop(key, None) if old is _MISSING else mapping.__setitem__(key, old))
        mapping[key] = value

    def undo(self) -> None:
        while self._undo:
            self._undo.pop()()

    def __enter__(self) -> Patcher:
        return self

    def __exit__(self, *exc) -> None:
        self.undo()


def set_device_memory(cp: FakeCupy, free: int, total: int | None = None) -> None:
    """Give the stand-in a device with ``free`` bytes free (``cupy.cuda.Device().mem_info``)
    and an empty memory pool: :func:`modlin._planning.tiling.budget` tiles for that device."""

    class Device:
        id = 0
        mem_info = (int(free), int(total if total is not None else free))

    class Pool:
        def free_bytes(self) -> int:
            return 0

        def free_all_blocks(self) -> None:
            pass

    cp.cuda.Device = Device
    cp.__dict__["get_default_memory_pool"] = Pool


def install(patch: Any, harness, *, device_memory: int | None = None) -> Callable[[Any], FakeCupyArray]:
    """Put the stand-in in place: ``sys.modules["cupy"]`` (and the cuBLAS module
    :func:`modlin._engines.cuda.gemm_i8` imports), :func:`modlin._engines.cuda.launch` on ``harness`` (the
    kernels' host twins, a ``ctypes`` library whose functions have their ``argtypes``).

    Parameters
    ----------
    patch
        pytest's ``monkeypatch`` or a :class:`Patcher`: what it sets is undone with it.
    harness
        The host harness (``conftest.build_harness``).
    device_memory : int, optional
        Free device memory (:func:`set_device_memory`); by default the stand-in has no
        device API and products tile within the host budget.

    Returns
    -------
    to_gpu
        ``to_gpu(x)``: a host array as a device array (not recorded). Its attributes:
        ``launched`` (the kernels launched, by name, in order), ``ledger`` (the
        :class:`Ledger`) and ``cupy`` (the :class:`FakeCupy` module).
    """
    from modlin._engines import cuda as _cuda

    cp = FakeCupy()
    ledger = Ledger()
    patch.setitem(sys.modules, "cupy", cp)
    cublas = _cublas()
    libs = types.ModuleType("cupy_backends.cuda.libs")
    libs.cublas = cublas
    cuda = types.ModuleType("cupy_backends.cuda")
    cuda.libs = libs
    backends = types.ModuleType("cupy_backends")
    backends.cuda = cuda
    for name, mod in (("cupy_backends", backends), ("cupy_backends.cuda", cuda), ("cupy_backends.cuda.libs", libs),
                      ("cupy_backends.cuda.libs.cublas", cublas)):
        patch.setitem(sys.modules, name, mod)
    patch.setattr(sys.modules[__name__], "_active", ledger)
    launched: list[str] = []
    patch.setattr(_cuda, "launch", _launcher(harness, launched))
    if device_memory is not None:
        set_device_memory(cp, device_memory)

    def to_gpu(x) -> FakeCupyArray:
        return np.array(x).view(FakeCupyArray)

    to_gpu.launched = launched
    to_gpu.ledger = ledger
    to_gpu.cupy = cp
    return to_gpu
