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
    version = f"numba-{numba.__version__}"
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
    assert where == str(tmp_path / f"numba-{numba.__version__}")
    assert any("_parity_kernel" in f.name for f in _cached_files(tmp_path))
    assert _cached_files(PACKAGE) == []


def test_unwritable_cache_dir_falls_back_outside_the_package(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    _run({"MODLIN_CACHE_DIR": str(blocker / "cache")})  # makedirs fails below a file
    assert _cached_files(PACKAGE) == []
