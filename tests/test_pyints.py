"""Python ints <-> 16-bit pieces (modlin._arith.pyints), against ``int.to_bytes``.

Every conversion is checked on each implementation: the public function, the
marshal path, the ``int.to_bytes`` / ``int.from_bytes`` fallback and (reading)
the ints' own memory, called directly.
"""

from __future__ import annotations

import marshal
import pathlib
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, strategies as st

from modlin._arith import pyints as P, pyints_cpython as PC, pyints_marshal as PM


def _objects(x):  # reads object arrays only (the public function sends it no others)
    return P.halves_from_objects(x, None) if x.dtype == object else P.to_halves(x)


def _objects_write(limbs, neg=None):  # makes ints of uint16 limbs only (IntWriter sends it no others)
    limbs, neg = P.check_limbs(limbs, neg)
    if limbs.dtype != np.uint16:
        return P.from_limbs(limbs, neg)
    out = np.empty(limbs.shape[1], dtype=object)
    assert P.objects_from_limbs(limbs, neg, P.slots_of(out), *P.c_api(), P.int_layout() == 1) == out.size
    return out


TO = [P.to_halves, P.to_halves_marshal, P.to_halves_bytes, _objects]
FROM = [P.from_limbs, PM.from_limbs_marshal, P.from_limbs_bytes, _objects_write]
to_ids = ["public", "marshal", "bytes", "objects"]
from_ids = to_ids


class SubInt(int):
    pass


def obj(vals, shape=None) -> np.ndarray:
    """Object array of exactly these objects (no numpy conversion of the values)."""
    a = np.empty(len(vals), dtype=object)
    a[:] = list(vals)
    return a if shape is None else a.reshape(shape)


def ref_halves(vals) -> np.ndarray:
    """The oracle: smallest H by search, pieces by ``int.to_bytes``."""
    H = 1
    while not all(-(2 ** (16 * H - 1)) <= v < 2 ** (16 * H - 1) for v in vals):
        H += 1
    raw = b"".join(v.to_bytes(2 * H, "little", signed=True) for v in vals)
    return np.frombuffer(raw, dtype=np.uint16).reshape(len(vals), H).T


def check_halves(f, x: np.ndarray) -> None:
    before = x.copy()
    vals = x.ravel().tolist()
    h = f(x)
    assert h is not None
    assert h.dtype == np.uint16 and h.flags.c_contiguous
    assert h.shape == (ref_halves(vals).shape[0], x.size)
    np.testing.assert_array_equal(h, ref_halves(vals))
    # and back: the pieces decode to the values
    back = [int.from_bytes(c.tobytes(), "little", signed=True) for c in h.T]
    assert back == vals
    assert x.shape == before.shape and x.ravel().tolist() == before.ravel().tolist()


def mag_limbs(vals, L=None, dtype=np.uint16):
    """``(limbs, neg)`` of the values: 16-bit pieces of |v|, least significant first."""
    if L is None:
        L = max([abs(v).bit_length() for v in vals] + [0]) // 16 + 1
    raw = b"".join(abs(v).to_bytes(2 * L, "little") for v in vals)
    limbs = np.frombuffer(raw, dtype=np.uint16).reshape(len(vals), L).T.astype(dtype)
    return limbs, np.array([v < 0 for v in vals], dtype=bool)


def check_from(f, limbs, neg, vals) -> None:
    lc = limbs.copy()
    nc = None if neg is None else neg.copy()
    out = f(limbs, neg)
    assert out.dtype == object and out.shape == (len(vals),)
    assert out.tolist() == vals
    assert all(type(v) is int for v in out)
    np.testing.assert_array_equal(limbs, lc)
    if neg is not None:
        np.testing.assert_array_equal(neg, nc)


def boundaries(jmax=70):
    out = {0, 1, -1, 2**31 - 1, -(2**31), 2**31, -(2**31) - 1, 2**32, -(2**32)}
    for j in range(1, jmax):
        for b in (2 ** (15 * j), 2 ** (16 * j), 2 ** (16 * j - 1)):
            for v in (b - 1, b, b + 1):
                out |= {v, -v}
    return sorted(out)


# --------------------------------------------------------------------------- to_halves


def test_marshal_format_holds():
    # CPython 3.10+ marshal: the fast path must be the one in use here
    assert P.marshal_ok()


def test_objects_layout_holds():
    # CPython 3.11-3.13 ints: the public function reads them straight from their memory
    assert P.int_layout() is not None
    assert P.objects_read_ok.__wrapped__()


def test_objects_self_test_catches_a_wrong_layout(monkeypatch):
    # the other CPython layout's size word, read from these ints: the self-test says no,
    # and the public function goes through marshal (same results)
    monkeypatch.setattr(PC, "int_layout", lambda: 1 - (sys.version_info >= (3, 12)))
    assert not P.objects_read_ok.__wrapped__()
    monkeypatch.setattr(P, "objects_read_ok", lambda: False)
    used = []
    real = P.to_halves_marshal
    monkeypatch.setattr(P, "to_halves_marshal", lambda x: used.append(1) or real(x))
    check_halves(P.to_halves, obj(boundaries(10)))
    assert used


def test_objects_unknown_layout(monkeypatch):
    monkeypatch.setattr(PC.sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else None)
    assert P.int_layout() is None and not P.objects_read_ok.__wrapped__()


def test_objects_made_as_python_makes_them():
    # the ints IntWriter makes itself: exact, of type int, one reference each (the array's),
    # every reference they replaced (None) released
    assert P.objects_write_ok.__wrapped__()
    vals = boundaries(40) + [0, -0]
    limbs, neg = mag_limbs(vals)
    neg[-1] = True  # -0 is 0
    nones = []
    for _ in range(4):  # nothing leaks: after the first round (loading the kernel), the counts stay
        out = _objects_write(limbs, neg)
        assert out.tolist() == vals and all(type(v) is int for v in out)
        assert [v == int(str(v)) and hash(v) == hash(int(str(v))) for v in out] == [True] * len(vals)
        big = out[vals.index(max(vals))]
        assert sys.getrefcount(big) == 3  # the array, `big` and getrefcount's argument
        del out, big
        nones.append(sys.getrefcount(None))
    assert nones[1] == nones[2] == nones[3]


def test_objects_writer_self_test_catches_a_wrong_layout(monkeypatch):
    monkeypatch.setattr(PC, "int_layout", lambda: 1 - (sys.version_info >= (3, 12)))
    assert not P.objects_write_ok.__wrapped__()
    monkeypatch.setattr(PC, "c_api", lambda: None)
    assert not P.objects_write_ok.__wrapped__()


def test_int_writer_out_of_memory(monkeypatch):
    # the interpreter could not make an int: MemoryError, the entries made so far kept
    import ctypes

    calls = []

    @ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)
    def new(n):
        calls.append(n)
        return 0

    release = P.c_api()[1]
    assert P.objects_write_ok()  # checked (and cached) before the stand-in
    monkeypatch.setattr(P, "c_api", lambda: (ctypes.cast(new, ctypes.c_void_p).value, release))
    w = P.IntWriter(3)
    assert w._direct
    limbs, neg = mag_limbs([1, 2, 3])
    with pytest.raises(MemoryError):
        w.add(limbs.astype(np.uint16), neg)
    assert calls == [1]


@pytest.mark.parametrize("where", [1, 2, 63, -1])
def test_objects_wider_than_the_sample(monkeypatch, where):
    # the sample (about 64 entries, evenly spaced) misses the widest entries: they are
    # measured, and every entry written again
    measured = []
    need = PC._objects_need
    monkeypatch.setattr(PC, "_objects_need", lambda *a: measured.append(1) or need(*a))
    E = 64 * 50
    vals = [(-1) ** e * (e % 7) for e in range(E)]
    for v in (2**300 + 5, -(2**299), 2**47):
        vals[where] = v
        x = obj(vals)
        check_halves(_objects, x)
        check_halves(P.to_halves, x.reshape(64, 50))
        assert P.halves_from_objects(x, 2) is None  # more than `most` pieces: refused
        where += 50
    assert len(measured) >= 6
    # the self-test takes that way too
    measured.clear()
    assert P.objects_read_ok.__wrapped__() and measured


@pytest.mark.parametrize("objects", [True, False], ids=["objects", "marshal"])
def test_most_pieces(monkeypatch, objects):
    monkeypatch.setattr(P, "objects_read_ok", lambda: objects)
    x = obj([3, -(2**47), 2**40])  # 3 pieces
    assert P.to_halves(x, 3).shape == (3, 3)
    assert P.to_halves(x, 2) is None
    assert P.to_halves(obj([1, 2]), 1).shape == (1, 2)
    assert P.to_halves(obj([1, True]), 5) is None


def test_objects_leave_the_ints_as_they_were():
    # read, not referenced: no count changes, the array and its ints as they were
    vals = [2**127 - 1, -(2**100), 12345]
    x = obj(vals * 7, (3, 7))[:, ::2]  # not contiguous: read through a copy
    counts = [sys.getrefcount(v) for v in x.ravel()]
    check_halves(_objects, x)
    assert [sys.getrefcount(v) for v in x.ravel()] == counts
    with pytest.raises(TypeError, match="object arrays only"):
        P.halves_from_objects(np.arange(3), None)


@pytest.mark.parametrize("f", TO, ids=to_ids)
def test_boundaries_minimal_H(f):
    vals = boundaries()
    for v in vals:  # one at a time: H exactly minimal for each boundary
        check_halves(f, obj([v]))
    check_halves(f, obj(vals))


@pytest.mark.parametrize("f", TO, ids=to_ids)
@pytest.mark.parametrize("j", [1, 2, 3, 7])
def test_H_choice_edges(f, j):
    top = 2 ** (16 * j - 1)
    assert f(obj([top - 1, -top])).shape[0] == j
    assert f(obj([top])).shape[0] == j + 1
    assert f(obj([-top - 1])).shape[0] == j + 1
    assert f(obj([-top, 0, 1])).shape[0] == j


@pytest.mark.parametrize("E", [1, 3, 63, 64, 65, 255, 256, 257, 300, 511, 513, 1029])
@pytest.mark.parametrize("top", [31, 64, 255, 1100])
def test_blocks_flushes_and_stream_end(E, top, rng):
    # entries go 64 at a time and out 256 at a time, and the last ones are read
    # byte by byte up to the stream's end: every boundary, with sizes from 0 to
    # top bits mixed ('i' entries among 'l' ones), both signs, and E % 4 != 0
    vals = []
    for b in rng.integers(0, top + 1, E).tolist():
        sign = -1 if rng.integers(2) else 1
        vals.append(sign * (int.from_bytes(rng.bytes(b // 8 + 1), "little") % 2**b))
    vals[-1] = -(2 ** (top - 1))  # the last entry long (when top is) and at a sign edge
    check_halves(P.to_halves_marshal, obj(vals))
    check_halves(_objects, obj(vals))  # its tiles of PYINTS_FLUSH entries, for more than 8 pieces


ints = st.integers(1, 3000).flatmap(lambda b: st.integers(-(2**b), 2**b))


@given(st.lists(ints, max_size=20))
def test_random_roundtrip(vals):
    x = obj(vals)
    for f in TO:
        check_halves(f, x)
    limbs, neg = mag_limbs(vals)
    for f in FROM:
        check_from(f, limbs, neg, vals)


@given(st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30))
def test_random_small(vals):
    # around the int32 / long switch of marshal
    for f in TO:
        check_halves(f, obj(vals))
    for dt in (np.uint16, np.int64, np.float64):
        limbs, neg = mag_limbs(vals, dtype=dt)
        check_from(PM.from_limbs_marshal, limbs, neg, vals)


@pytest.mark.parametrize("f", TO, ids=to_ids)
def test_empty_and_scalar_shapes(f):
    for shape in [(0,), (3, 0), (0, 0, 2)]:
        h = f(np.empty(shape, dtype=object))
        assert h.shape == (1, 0) and h.dtype == np.uint16
    x = np.empty((), dtype=object)
    x[()] = -(2**100)
    check_halves(f, x)
    check_halves(f, obj([7]))
    check_halves(f, obj([2**1000], shape=(1, 1, 1)))


@pytest.mark.parametrize("f", TO, ids=to_ids)
def test_noncontiguous_views(f):
    rng = np.random.default_rng(1)
    mant, shift = rng.integers(0, 2**62, 48), rng.integers(0, 300, 48)
    vals = [int(v) * 2 ** int(s) * (-1) ** int(v) for v, s in zip(mant, shift)]
    a = obj(vals, shape=(6, 8))
    for view in (a[::2, ::-1], a.T, a[1:, 3], a[::-3, 1::2].T):
        assert not view.flags.c_contiguous or view.size <= 1
        check_halves(f, view)
        ref = ref_halves(np.ascontiguousarray(view).ravel().tolist())
        np.testing.assert_array_equal(f(view), ref)


@pytest.mark.parametrize("f", TO, ids=to_ids)
@pytest.mark.parametrize(
    "bad",
    [True, False, np.int64(3), np.uint8(3), np.bool_(True), 1.0, np.float64(2.0),
     None, "7", b"7", Fraction(3), SubInt(3), 2 + 0j, [1], (1,)],
    ids=repr,
)
def test_non_ints_refused(f, bad):
    # bool and int subclasses are refused too (documented choice): the
    # caller's slow path converts or reports them
    for pos in range(3):
        vals = [5, 2**100, -3]
        vals[pos] = bad
        x = obj(vals)
        assert f(x) is None
        assert x.tolist() == vals  # untouched
    assert f(obj([bad])) is None


@pytest.mark.parametrize("f", TO, ids=to_ids)
def test_non_object_dtypes(f):
    x = np.array([[-(2**63), 5], [2**63 - 1, -1]], dtype=np.int64)
    h = f(x)
    np.testing.assert_array_equal(h, ref_halves(x.ravel().tolist()))
    assert f(np.array([1.0, 2.0])) is None
    assert f(np.array([True])) is None


# --------------------------------------------------------------------------- from_limbs


@pytest.mark.parametrize("f", FROM, ids=from_ids)
@pytest.mark.parametrize("dt", [np.uint16, np.int64, np.float64])
def test_from_limbs_dtypes_and_boundaries(f, dt):
    vals = boundaries(40)
    limbs, neg = mag_limbs(vals, dtype=dt)
    check_from(f, limbs, neg, vals)
    pos = [abs(v) for v in vals]
    check_from(f, mag_limbs(pos, dtype=dt)[0], None, pos)


@pytest.mark.parametrize("f", FROM, ids=from_ids)
def test_from_limbs_edges(f):
    # zero magnitude with neg: 0
    zero = np.zeros((3, 4), dtype=np.uint16)
    check_from(f, zero, np.array([True, False, True, True]), [0] * 4)
    # L = 1, every 16-bit value, both signs
    h = np.arange(65536, dtype=np.uint16)[None, :]
    check_from(f, h, None, list(range(65536)))
    check_from(f, h, np.ones(65536, dtype=bool), [-v for v in range(65536)])
    # large L, values of all sizes, padded with zero limbs
    vals = [(-1) ** k * (2 ** (37 * k) + k) for k in range(110)]
    limbs, neg = mag_limbs(vals, L=300)
    check_from(f, limbs, neg, vals)
    # L = 0 and E = 0
    check_from(f, np.zeros((0, 3), dtype=np.int64), None, [0, 0, 0])
    for L in (0, 1, 5):
        check_from(f, np.zeros((L, 0), dtype=np.float64), np.zeros(0, dtype=bool), [])
    # non-contiguous inputs
    vals = [3 * 7**k * (-1) ** k for k in range(40)]
    limbs, neg = mag_limbs(vals + vals)
    check_from(f, limbs[:, ::2], neg[::2], (vals + vals)[::2])
    check_from(f, np.asfortranarray(limbs), neg, vals + vals)


@pytest.mark.parametrize("f", FROM, ids=from_ids)
def test_from_limbs_int32_edges(f):
    # marshal writes 'i' exactly for -2**31 <= v < 2**31
    vals = [2**31 - 1, 2**31, -(2**31), -(2**31) - 1, 2**32 - 1, -(2**32) + 1,
            2**15, -(2**15), 2**30]
    for v in vals:
        check_from(f, *mag_limbs([v], L=2), [v])
        check_from(f, *mag_limbs([v], L=4, dtype=np.float64), [v])


@pytest.mark.parametrize("f", FROM, ids=from_ids)
def test_from_limbs_rejects(f):
    for bad in (65536, -1):
        limbs = np.zeros((3, 2), dtype=np.int64)
        for pos in [(0, 0), (1, 1), (2, 0)]:
            limbs[:] = 1
            limbs[pos] = bad
            with pytest.raises(ValueError):
                f(limbs)
    for bad in (0.5, np.nan, np.inf, 65536.0, -1.0, 65535.5):
        limbs = np.ones((3, 2))
        limbs[0, 1] = bad
        with pytest.raises(ValueError):
            f(limbs)
    with pytest.raises(TypeError):
        f(np.zeros((2, 2), dtype=np.uint32))
    with pytest.raises(ValueError):
        f(np.zeros(4, dtype=np.uint16))
    with pytest.raises(ValueError):
        f(np.zeros((2, 4), dtype=np.uint16), np.zeros(3, dtype=bool))


def test_roundtrip_through_halves():
    # to_halves gives two's complement; magnitudes and signs give the values back
    vals = boundaries(20) + [3**k * (-1) ** k for k in range(300)]
    h = P.to_halves(obj(vals))
    H = h.shape[0]
    neg = h[H - 1] >= 2**15  # the top piece carries the sign
    np.testing.assert_array_equal(neg, [v < 0 for v in vals])
    # magnitudes: negate the negative columns in two's complement (~h + 1)
    mag = h.astype(np.int64)
    mag[:, neg] ^= 0xFFFF
    carry = neg.astype(np.int64)
    for j in range(H):
        mag[j] += carry
        carry = mag[j] >> 16
        mag[j] &= 0xFFFF
    assert P.from_limbs(mag, neg).tolist() == vals


# ----------------------------------------------------------- fallback, self-check


def test_public_functions_use_fallback(monkeypatch):
    monkeypatch.setattr(P, "marshal_ok", lambda direction="both": False)
    monkeypatch.setattr(P, "objects_read_ok", lambda: False)
    monkeypatch.setattr(P, "objects_write_ok", lambda: False)

    def boom(*a, **k):
        raise AssertionError("marshal path used")

    monkeypatch.setattr(P, "to_halves_marshal", boom)
    monkeypatch.setattr(P, "halves_from_objects", boom)
    monkeypatch.setattr(P, "objects_from_limbs", boom)
    monkeypatch.setattr(PM, "from_limbs_marshal", boom)
    monkeypatch.setattr(P, "ints_marshal", boom)
    vals = boundaries(10)
    check_halves(P.to_halves, obj(vals))
    assert P.to_halves(obj([1, True])) is None
    check_from(P.from_limbs, *mag_limbs(vals), vals)


class _Marshal:
    """A stand-in for the marshal module with a different int format."""

    def __init__(self, dumps=marshal.dumps, loads=marshal.loads):
        self.dumps, self.loads = dumps, loads


@pytest.mark.parametrize(
    "fake",
    [
        _Marshal(dumps=lambda o, v: marshal.dumps(o, 4)),  # FLAG_REF set on shared ints
        _Marshal(dumps=lambda o, v: marshal.dumps(o, 2).replace(b"l", b"L")),
        _Marshal(loads=lambda b: [-v for v in marshal.loads(b)]),
        _Marshal(loads=lambda b: [float(v) for v in marshal.loads(b)]),
        _Marshal(loads=lambda b: 1 / 0),
        _Marshal(dumps=lambda o, v: marshal.dumps([True] + o[1:], v)),
    ],
)
def test_self_check_detects_other_formats(monkeypatch, fake):
    assert P.marshal_ok.__wrapped__()
    monkeypatch.setattr(PM, "marshal", fake)
    assert not P.marshal_ok.__wrapped__()


@pytest.mark.parametrize("cap", [0, 5, 100, None])
def test_marshal_stream_is_what_dumps_writes(cap):
    # byte for byte (normalised digits, 'i' exactly when it fits), also when
    # the kernel's buffer starts too small and grows
    vals = boundaries(30) + [(-1) ** k * 5**k for k in range(400)]
    limbs, neg = mag_limbs(vals, L=60)
    if cap is None:
        cap = 5 + len(vals) * (5 + 2 * 64)
    buf, n = PM._write_marshal(limbs, neg, 0, limbs.shape[1], np.empty(max(cap, 5), dtype=np.uint8))
    assert buf[:n].tobytes() == marshal.dumps(vals, 2)


def test_first_buffer_cap(monkeypatch):
    monkeypatch.setattr(PM, "PYINTS_MAX_FIRST_BUFFER", 64)
    vals = [(-1) ** k * 3 ** (k % 500) for k in range(1500)]
    check_from(PM.from_limbs_marshal, *mag_limbs(vals, L=60), vals)


@pytest.mark.parametrize("f", FROM, ids=from_ids)
def test_bad_limb_late(f):
    limbs, neg = mag_limbs(list(range(300)), L=3)
    limbs = limbs.astype(np.float64)
    limbs[1, 250] = 0.25
    with pytest.raises(ValueError):
        f(limbs, neg)


def test_scan_rejects_malformed_streams():
    good = np.frombuffer(marshal.dumps([1, 2**40, -(2**70)], 2), dtype=np.uint8)
    assert PM._scan_marshal(good, 3) == (True, 5)
    assert not PM._scan_marshal(good, 2)[0]  # wrong count
    assert not PM._scan_marshal(good[:-1], 3)[0]  # truncated
    for cut in (1, 4, 6, 10, 12):
        assert not PM._scan_marshal(good[:cut], 3)[0]
    assert not PM._scan_marshal(np.append(good, np.uint8(0)), 3)[0]  # trailing bytes
    tup = np.frombuffer(marshal.dumps((1, 2), 2), dtype=np.uint8)
    assert not PM._scan_marshal(tup, 2)[0]


# --------------------------------------------------------------------------- IntWriter


def _written(vals, cuts, L=None, dtype=np.uint16):
    """IntWriter fed the values' limbs in the chunks between ``cuts``."""
    limbs, neg = mag_limbs(vals, L=L, dtype=dtype)
    w = P.IntWriter(len(vals))
    edges = [0, *cuts, len(vals)]
    for a, b in zip(edges, edges[1:]):
        w.add(limbs[:, a:b], neg[a:b])
    return w.result()


@pytest.mark.parametrize("marshal_ok", [True, False], ids=["marshal", "bytes"])
@pytest.mark.parametrize("dt", [np.uint16, np.int64, np.float64])
def test_int_writer_chunks_equal_from_limbs(monkeypatch, marshal_ok, dt):
    if not marshal_ok:
        monkeypatch.setattr(P, "marshal_ok", lambda direction="both": False)
    vals = boundaries(30) + [(-1) ** k * 7**k for k in range(300)]
    for cuts in ([], [1], [63, 64, 65], list(range(0, len(vals), 97)), [len(vals)]):
        out = _written(vals, cuts, L=60, dtype=dt)
        assert out.dtype == object and out.tolist() == vals
        assert all(type(v) is int for v in out)


@pytest.mark.parametrize("f", [P.from_limbs, PM.from_limbs_marshal])
def test_several_streams(monkeypatch, f):
    # one marshal stream per 7 entries, the buffer reused from one to the next
    monkeypatch.setattr(PM, "PYINTS_STREAM_ENTRIES", 7)
    vals = boundaries(20) + [(-1) ** k * 3**k for k in range(200)]
    check_from(f, *mag_limbs(vals), vals)
    assert _written(vals, [5, 6, 30, 31, 100]).tolist() == vals


def test_int_writer_grows_its_buffer(monkeypatch):
    # the first buffer far too small for the stream: it grows chunk after chunk
    monkeypatch.setattr(PM, "PYINTS_MAX_FIRST_BUFFER", 16)
    vals = [(-1) ** k * 3 ** (k % 500) for k in range(1500)]
    assert _written(vals, list(range(0, 1500, 128)), L=60).tolist() == vals


@pytest.mark.parametrize("direct", [True, False], ids=["kernel", "marshal"])
def test_int_writer_into_a_given_array(monkeypatch, direct):
    """Into a given C-contiguous object array (any shape), its entries replaced and released
    (the references they held are dropped); arrays of another kind are refused."""
    import gc
    import weakref

    if not direct:
        monkeypatch.setattr(P, "objects_write_ok", lambda: False)
    vals = boundaries(20)[:24] + [-(7**40), 0, 3]
    limbs, neg = mag_limbs(vals)

    class Held:  # an entry the array held before, to see it released
        pass

    dst = np.empty((3, len(vals) // 3), dtype=object)
    held = Held()
    dst[...] = held
    gone = weakref.ref(held)
    del held
    w = P.IntWriter(len(vals), dst)
    w.add(limbs[:, :10], neg[:10])
    w.add(limbs[:, 10:], neg[10:])
    got = w.result()
    assert np.shares_memory(got, dst) and dst.ravel().tolist() == vals
    gc.collect()
    assert gone() is None
    for bad in (np.empty(len(vals), dtype=np.int64), np.empty(len(vals) + 1, dtype=object),
                np.empty((len(vals), 2), dtype=object)[:, 0]):
        with pytest.raises(ValueError, match="C-contiguous object array of 27 entries"):
            P.IntWriter(len(vals), bad)


def test_int_writer_empty_and_errors():
    assert P.IntWriter(0).result().shape == (0,)
    limbs, neg = mag_limbs([1, 2, 3])
    w = P.IntWriter(2)
    with pytest.raises(ValueError, match="3 entries given to an IntWriter of 2"):
        w.add(limbs, neg)
    w.add(limbs[:, :1], neg[:1])
    with pytest.raises(ValueError, match="1 of the IntWriter's 2 entries given"):
        w.result()
    with pytest.raises(ValueError, match=r"\[0, 65536\)"):
        w.add(np.array([[0.5]]), None)


def test_each_direction_checks_only_its_own_kernels():
    # reading Python ints never compiles (or loads) the writer's kernels, nor writing the reader's
    # (which read or make the ints' memory, or marshal streams where that layout is unknown)
    code = ("import numpy as np\nfrom modlin._arith import pyints as P, pyints_cpython as PC, pyints_marshal as PM\n"
            "P.{call}\nprint(len(PC._objects_halves.signatures) + len(PM._scan_marshal.signatures),"
            " len(P.objects_from_limbs.signatures) + len(PM._append_marshal.signatures))")
    for call, want in (("to_halves(np.array([2**70, -3], dtype=object))", "1 0"),
                       ("from_limbs(np.array([[1, 2], [3, 4]], dtype=np.uint16))", "0 1")):
        r = subprocess.run([sys.executable, "-c", code.format(call=call)], capture_output=True, text=True,
                           timeout=300, cwd=pathlib.Path(PC.__file__).parents[2])
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == want.split()


def test_one_bit_length_the_branch_free_one():
    """``bit_length`` is defined once, the frexp one the conversions were written for (a
    looping definition further down once replaced it in every kernel: numba reads the
    module's globals when it compiles), and it is ``int.bit_length`` on every digit, limb
    and piece value."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(PM))
    defs = [f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef) and f.name == "bit_length"]
    assert len(defs) == 1, [f.lineno for f in defs]
    assert "frexp" in inspect.getsource(PM.bit_length.py_func)
    values = [0, 1, 2, 3, 2**15 - 1, 2**15, 2**16 - 1, 2**30 - 1, 2**30, 2**32 - 1, 2**52, 2**53 - 1]
    values += [int(v) for v in np.random.default_rng(2).integers(0, 2**53, 200)]
    assert [PM.bit_length.py_func(v) for v in values] == [v.bit_length() for v in values]
    # compiled, inside a kernel, on the uint32 digits and uint16 pieces the conversions read
    import numba

    @numba.njit  # not cached: a test's own kernel
    def lengths(x):
        out = np.empty(x.shape[0], dtype=np.int64)
        for i in range(x.shape[0]):
            out[i] = PM.bit_length(x[i])
        return out

    for dtype in (np.uint16, np.uint32, np.int64):
        x = np.array([v for v in values if v <= np.iinfo(dtype).max], dtype=dtype)
        assert lengths(x).tolist() == [int(v).bit_length() for v in x]


class _Int(int):
    pass


@pytest.mark.parametrize("bad", [True, np.int64(3), _Int(3), 3.0, None, Fraction(3), "3"])
def test_all_exact_ints(bad):
    """The type check read from the objects: Python ints of every size and sign pass; anything
    else, bool and int subclasses and NumPy integers included, does not, wherever it sits
    (strided views too); non-object arrays are refused; without the layout, None."""
    x = np.array([0, -1, 2**30, -(2**100), 2**127 - 1] * 40, dtype=object).reshape(20, 10)
    assert PC.all_exact_ints(x) is True and PC.all_exact_ints(x[::3, ::-2]) is True
    assert PC.all_exact_ints(np.empty((0, 4), dtype=object)) is True
    for i, j in ((0, 0), (19, 9), (7, 4)):
        y = x.copy()
        y[i, j] = bad
        assert PC.all_exact_ints(y) is False
        assert PC.all_exact_ints(y[i:i + 1, ::-1]) is False and PC.all_exact_ints(y.T) is False
        assert PC.all_exact_ints(np.delete(y, i, axis=0)) is True
        assert y[i, j] is bad or y[i, j] == bad  # the input as it was
    with pytest.raises(TypeError, match="object arrays only"):
        PC.all_exact_ints(np.arange(3))


def test_all_exact_ints_without_the_layout(monkeypatch):
    monkeypatch.setattr(PC, "objects_read_ok", lambda: False)
    assert PC.all_exact_ints(np.array([1, 2], dtype=object)) is None
    # python_ints then walks the types itself, with the same answers
    assert P.python_ints(np.array([1, 2], dtype=object)).tolist() == [1, 2]
    with pytest.raises(TypeError, match="found bool"):
        P.python_ints(np.array([1, True], dtype=object))
