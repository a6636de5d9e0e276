"""Where compiled kernels are cached: a per-user directory, never inside the package.

numba's default (the package's ``__pycache__``) leaves files pip does not own,
which survive an uninstall and then shadow an editable install of modlin as an
empty namespace package.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import numba
import numpy as np

import modlin
from modlin import _jit
from modlin.linalg._arith import parity

PACKAGE = pathlib.Path(modlin.__file__).parent

# Runs one small kernel in a fresh interpreter and prints the cache directory it used.
SCRIPT = """
import numpy as np
from modlin import _jit
from modlin.linalg._arith import parity
assert parity(np.array([1, 0, 2])) == 1
print(_jit.cache_dir())
"""


def _cached_files(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(root.rglob("*.nb[ic]"))


def _run(env_update: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("MODLIN_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env.update(env_update)
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_nothing_cached_inside_the_package():
    assert parity(np.array([2, 0, 1])) == 0  # a kernel has run (and been cached) in this process
    assert _cached_files(PACKAGE) == []


def test_cache_dir_precedence(monkeypatch, tmp_path):
    version = _jit._TAG
    monkeypatch.setenv("MODLIN_CACHE_DIR", str(tmp_path / "mine"))
    assert _jit.cache_dir() == str(tmp_path / "mine" / version)
    monkeypatch.delenv("MODLIN_CACHE_DIR")
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path / "numba"))
    assert _jit.cache_dir() == str(tmp_path / "numba" / "modlin" / version)
    monkeypatch.setattr(numba.config, "CACHE_DIR", "")
    default = pathlib.Path(_jit.cache_dir())
    assert default.name == version and "modlin" in default.parts
    assert PACKAGE not in default.parents


def test_modlin_cache_dir_is_used(tmp_path):
    where = _run({"MODLIN_CACHE_DIR": str(tmp_path)})
    assert where == str(tmp_path / _jit._TAG)
    assert any("_parity_kernel" in f.name for f in _cached_files(tmp_path))
    assert _cached_files(PACKAGE) == []


def test_unwritable_cache_dir_falls_back_outside_the_package(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _run({"MODLIN_CACHE_DIR": str(blocker / "cache")})  # makedirs fails below a file
    assert _cached_files(PACKAGE) == []


# A product that loads cached kernels, then a kernel that must be compiled in the same process.
LOADS = """
import sys
import numpy as np
import modlin
from modlin import _jit
p = 2**31 - 1
a = np.arange(64 * 64, dtype=np.int64).reshape(64, 64) % p
assert np.array_equal(modlin.matmul(a, a, p), (a.astype(object) @ a.astype(object)) % p)
print("numba.np.arraymath" in sys.modules)

fresh = _jit.njit(cache=False)(lambda x: x.sum() + 1)  # never cached: compiled in every run
print(fresh(np.arange(4.0)))
"""


def test_cached_kernels_load_without_numbas_full_initialisation(tmp_path):
    env = {"MODLIN_CACHE_DIR": str(tmp_path)}
    first, again = _run_code(LOADS, env), _run_code(LOADS, env)
    assert first.split() == ["True", "7.0"]  # the first run compiled (numba initialised)
    # loading cached kernels initialises numba's runtime only (its typing and lowering modules
    # are imported when something is compiled), and a new kernel still compiles after that
    assert again.split() == ["False", "7.0"]


def _run_code(code: str, env_update: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("MODLIN_CACHE_DIR", "NUMBA_CACHE_DIR")}
    env.update(env_update)
    # from the checkout's root, so that `import modlin` is this copy
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(PACKAGE.parent))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()
