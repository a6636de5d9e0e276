"""Front-door refusals whose message suggests a conversion: the suggestion, evaluated as
written, must work with the function that refused (a message that sends the user to
another refusal is worse than none).

Oracles are exact: python-flint's own products and Python ints, compared with float
results only where every value is an integer far below ``2**53``.
"""

from __future__ import annotations

import numpy as np
import pytest

import modlin
from modlin import ozaki

flint = pytest.importorskip("flint")

P127 = 2**127 - 1  # fmpz_mod_mat residues beyond int64 (object arrays of Python ints)


def _suggested(message: str) -> str:
    """The expression after the message's ``pass``: its longest prefix that is one."""
    assert "pass " in message, f"the message suggests nothing to pass: {message!r}"
    rest = message.split("pass ", 1)[1]
    for end in range(len(rest), 0, -1):
        try:
            compile(rest[:end], "<suggestion>", "eval")
        except SyntaxError:
            continue
        return rest[:end]
    raise AssertionError(f"no expression after 'pass' in {message!r}")


def _refusal(call, operand) -> str:
    with pytest.raises(TypeError, match=r"^A is ") as info:
        call(operand)
    return str(info.value)


def _exact(M) -> np.ndarray:
    return np.array([[int(e) for e in row] for row in M.tolist()], dtype=object)


# float functions: a square operand, multiplied by itself (B and C stay NumPy)
FLOAT_FUNCTIONS = {
    "ozaki.dgemm": lambda a: ozaki.dgemm(a, a),
    "ozaki.zgemm": lambda a: ozaki.zgemm(a, a),
    "ozaki.dsyrk": lambda a: ozaki.dsyrk(a),
}


@pytest.mark.parametrize("fn", FLOAT_FUNCTIONS, ids=list(FLOAT_FUNCTIONS))
def test_float_functions_suggest_a_conversion_they_take_for_fmpz_mat(fn):
    call = FLOAT_FUNCTIONS[fn]
    A = flint.fmpz_mat([[1, -2, 3], [4, 5, -6], [-7, 8, 9]])
    message = _refusal(call, A)
    expr = _suggested(message)
    assert "dtype=float" in expr, message
    got = call(eval(expr, {"numpy": np, "A": A}))  # the suggestion, as written
    want = _exact(A * A.transpose()) if fn == "ozaki.dsyrk" else _exact(A * A)
    assert np.array_equal(np.asarray(got), want.astype(float)), (expr, got)
    # the exact product it names takes the fmpz_mat itself
    assert "modlin.intmul" in message
    assert modlin.intmul(A, A) == A * A


@pytest.mark.parametrize("fn", FLOAT_FUNCTIONS, ids=list(FLOAT_FUNCTIONS))
@pytest.mark.parametrize("kind", ["nmod_mat", "fmpz_mod_mat 127 bits"])
def test_float_functions_suggest_a_conversion_they_take_for_residues(fn, kind):
    """Residues beyond int64 (fmpz_mod_mat modulo a 127-bit prime) would become an object
    array, which the float functions refuse: the suggestion must give floats."""
    call = FLOAT_FUNCTIONS[fn]
    vals = [1, 2, 3, 4]
    if kind == "nmod_mat":
        A = flint.nmod_mat(2, 2, vals, 7)
    else:
        A = flint.fmpz_mod_mat(2, 2, [P127 - 1 - v for v in vals], flint.fmpz_mod_ctx(P127))
    message = _refusal(call, A)
    x = eval(_suggested(message), {"numpy": np, "A": A})
    got = np.asarray(call(x))
    r = np.array(_exact(A), dtype=float)  # the representatives in [0, p), as the message says
    want = r @ r.T if fn == "ozaki.dsyrk" else r @ r
    # 127-bit residues are rounded to floats: equal to rounding, not exactly
    assert np.allclose(got, want, rtol=1e-12, atol=0), message


def test_integer_functions_still_suggest_exact_representatives():
    """An integer function (modlin.intmul) keeps the exact suggestion: ints, not floats."""
    A = flint.fmpz_mod_mat(2, 2, [P127 - 1, 2, 3, P127 - 4], flint.fmpz_mod_ctx(P127))
    message = _refusal(lambda a: modlin.intmul(a, a), A)
    expr = _suggested(message)
    assert "float" not in expr, message
    x = eval(expr, {"numpy": np, "A": A})
    assert np.array_equal(modlin.intmul(x, x), _exact(A) @ _exact(A))
