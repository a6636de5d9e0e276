"""Where compiled kernels are cached: a per-user directory, never inside the package.

numba's default (the package's ``__pycache__``) leaves files pip does not own,
which survive an uninstall and then shadow an editable install of modlin as an
empty namespace package. The one exception is the wheel's own kernels, compiled
into ``modlin/_kernels`` while it is built and used only for the sources, numba,
numpy and Python they were compiled for.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import numba
import numpy as np
import pytest

import modlin
from modlin._engines import jit as _jit
from modlin.linalg._arith import parity

PACKAGE = pathlib.Path(modlin.__file__).parent

# Runs one small kernel in a fresh interpreter and prints the cache directory it used.
SCRIPT = """
import numpy as np
from modlin._engines import jit as _jit
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
from modlin._engines import jit as _jit
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


# --- kernels shipped in the wheel (setup.py compiles them into modlin/_kernels) ---

SHIP = """
import numpy as np
from modlin._engines import jit as _jit
from modlin.linalg._arith import parity
assert _jit.BUILDING
assert parity(np.array([1, 0, 2])) == 1
print(_jit.write_manifest())
"""

# Runs the kernel, says whether the shipped kernels were usable and where modlin came from.
USE = """
import numpy as np
import modlin
from modlin._engines import jit as _jit
from modlin.linalg._arith import parity
assert parity(np.array([0, 1, 2])) == 0 and parity(np.array([1, 0, 2])) == 1
print(_jit.shipped(), modlin.__file__)
"""


def _copy_package(site: pathlib.Path) -> pathlib.Path:
    """A copy of this modlin under ``site`` (as an installed one would be), without caches."""
    shutil.copytree(PACKAGE, site / "modlin", ignore=shutil.ignore_patterns("__pycache__", "_kernels"))
    return site / "modlin"


def _run_in(site: pathlib.Path, code: str, env_update: dict[str, str]) -> str:
    env = {k: v for k, v in os.environ.items()
           if k not in ("MODLIN_CACHE_DIR", "NUMBA_CACHE_DIR", "MODLIN_BUILD_KERNELS")}
    env.update(env_update, PYTHONPATH=str(site), PYTHONDONTWRITEBYTECODE="1")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(site))
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def shipped_site(tmp_path_factory):
    """A copy of the package whose ``_kernels`` holds the parity kernel, compiled as setup.py does."""
    site = tmp_path_factory.mktemp("site")
    package = _copy_package(site)
    scratch = tmp_path_factory.mktemp("scratch")
    manifest = _run_in(site, SHIP, {"MODLIN_BUILD_KERNELS": "1", "MODLIN_CACHE_DIR": str(scratch)})
    assert pathlib.Path(manifest) == package / "_kernels" / "manifest.json"
    assert _cached_files(scratch) == []  # compiled into the package copy, not the user cache
    return site


def test_build_mode_compiles_into_the_shipped_directory(shipped_site):
    kernels = shipped_site / "modlin" / "_kernels"
    assert any(f.name.startswith("_arith._parity_kernel") for f in _cached_files(kernels / "linalg"))
    manifest = json.loads((kernels / "manifest.json").read_text())
    assert manifest["numba"] == numba.__version__ and manifest["numpy"] == np.__version__
    assert len(manifest["sources"]) == 64


def test_shipped_kernels_are_loaded_instead_of_compiled(shipped_site, tmp_path):
    used, where = _run_in(shipped_site, USE, {"MODLIN_CACHE_DIR": str(tmp_path)}).split()
    assert used == "True" and pathlib.Path(where).parent == shipped_site / "modlin"
    assert _cached_files(tmp_path) == []  # nothing compiled


def _variant(shipped_site: pathlib.Path, tmp_path: pathlib.Path) -> pathlib.Path:
    site = tmp_path / "site"
    shutil.copytree(shipped_site, site)
    return site


def test_an_edited_source_disables_the_shipped_kernels(shipped_site, tmp_path):
    # the edit is in a file without the kernel: a kernel may inline code from any file
    site = _variant(shipped_site, tmp_path)
    with open(site / "modlin" / "_plan.py", "a") as f:
        f.write("\n# edited after the wheel was built\n")
    used, _ = _run_in(site, USE, {"MODLIN_CACHE_DIR": str(tmp_path / "user")}).split()
    assert used == "False"
    assert any("_parity_kernel" in f.name for f in _cached_files(tmp_path / "user"))  # compiled afresh


@pytest.mark.parametrize("key, value", [("numba", "0.0.1"), ("numpy", "1.0"), ("python", "2.7")])
def test_shipped_kernels_of_other_versions_are_not_used(shipped_site, tmp_path, key, value):
    site = _variant(shipped_site, tmp_path)
    path = site / "modlin" / "_kernels" / "manifest.json"
    manifest = json.loads(path.read_text())
    path.write_text(json.dumps({**manifest, key: value}))
    used, _ = _run_in(site, USE, {"MODLIN_CACHE_DIR": str(tmp_path / "user")}).split()
    assert used == "False"
    assert any("_parity_kernel" in f.name for f in _cached_files(tmp_path / "user"))


def test_without_a_manifest_the_shipped_kernels_are_not_used(shipped_site, tmp_path):
    site = _variant(shipped_site, tmp_path)
    (site / "modlin" / "_kernels" / "manifest.json").unlink()
    used, _ = _run_in(site, USE, {"MODLIN_CACHE_DIR": str(tmp_path / "user")}).split()
    assert used == "False"


def test_ship_refuses_outside_a_wheel_build():
    from modlin._tools import warmup as _warmup

    with pytest.raises(RuntimeError, match="MODLIN_BUILD_KERNELS"):
        _warmup.ship()


def test_the_checkout_ships_no_kernels():
    assert not _jit.shipped() and not (PACKAGE / "_kernels").exists()


# --- one cache directory shared by several processes (xdist workers, Dask workers) ---

def test_concurrent_saves_keep_every_entry_and_its_own_data(tmp_path):
    # numba's own save (read the index, pick a free number, write the index, then the data)
    # lost entries and mixed data files when processes compiled into one directory at once
    import threading

    writers, keys = 8, 12
    start = threading.Barrier(writers)

    def write(w):
        f = _jit._SharedFile(cache_path=str(tmp_path), filename_base="k-1.py3", source_stamp="s")
        start.wait()
        for i in range(keys):
            f.save(("sig", w, i), {"code": (w, i)})

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    f = _jit._SharedFile(cache_path=str(tmp_path), filename_base="k-1.py3", source_stamp="s")
    assert all(f.load(("sig", w, i)) == {"code": (w, i)} for w in range(writers) for i in range(keys))
    assert len(list(tmp_path.glob("k-1.py3.*.nbc"))) == writers * keys  # one data file per entry
    assert not list(tmp_path.glob("*.tmp.*"))


def test_replaced_and_stale_data_files_are_deleted(tmp_path):
    old = _jit._SharedFile(cache_path=str(tmp_path), filename_base="k-1.py3", source_stamp="old")
    old.save("a", 1)
    old.save("a", 2)  # saved meanwhile by another process: kept, a loader may be reading it
    assert old.load("a") == 1 and len(list(tmp_path.glob("*.nbc"))) == 1
    (tmp_path / old._load_index()["a"]).unlink()  # an entry whose file is gone is written again
    old.save("a", 2)
    assert old.load("a") == 2 and len(list(tmp_path.glob("*.nbc"))) == 1
    new = _jit._SharedFile(cache_path=str(tmp_path), filename_base="k-1.py3", source_stamp="new")
    assert new.load("a") is None  # another source's index is ignored...
    new.save("b", 3)  # ...and its data deleted
    assert new.load("b") == 3 and len(list(tmp_path.glob("*.nbc"))) == 1
    other = _jit._SharedFile(cache_path=str(tmp_path), filename_base="k-10.py3", source_stamp="new")
    other.save("c", 4)  # another kernel's files are not this one's to delete
    assert new.load("b") == 3 and other.load("c") == 4


REDUCE = """
import numpy as np
from modlin.linalg import _arith
out = np.empty(5, dtype=np.int64)
for dtype in (np.int32, np.int64):
    _arith._reduce_kernel(np.array([-7, 9, 2**30, -2**31, 12], dtype=dtype), np.int64(10), out)
    print(*out)
print(sum(_arith._reduce_kernel.stats.cache_misses.values()))
"""


def test_an_index_entry_naming_another_signatures_code_is_not_used(tmp_path):
    # What the race above could leave behind: the int64 entry naming int32 machine code. The
    # dispatcher would call it with int64 arrays; the load must compile afresh instead.
    import pickle

    from numba.core.serialize import dumps

    env = {"MODLIN_CACHE_DIR": str(tmp_path)}
    right = "3 9 4 2 2\n3 9 4 2 2"
    assert _run_code(REDUCE, env) == right + "\n2"  # both compiled
    (index,) = tmp_path.rglob("_arith._reduce_kernel-*.nbi")
    with open(index, "rb") as f:
        version = pickle.load(f)
        stamp, overloads = pickle.loads(f.read())
    assert len(overloads) == 2
    (k32, n32), (k64, n64) = sorted(overloads.items(), key=lambda kv: str(kv[0][0]))
    with open(index, "wb") as f:
        pickle.dump(version, f, protocol=-1)
        f.write(dumps((stamp, {k32: n64, k64: n32})))
    assert _run_code(REDUCE, env) == right + "\n2"  # neither foreign entry loaded: both compiled
    assert _run_code(REDUCE, env) == right + "\n0"  # and cached again, correctly


WEIGH = """
import numpy as np
from modlin._arith.crt import _weigh
x, y, f, k = np.array([10.0, -3.0]), np.empty(2), np.zeros(2), np.zeros(2)
_weigh(x, y, f, k, 7.0, 1 / 7, 1.0)  # y = x mod 7, through residues.fmod_inv (another file)
print(*y.tolist(), sum(sum(d.stats.cache_misses.values()) for d in (_weigh,)))
"""


def test_an_edit_in_a_callees_file_recompiles_its_callers(tmp_path):
    # crt._weigh's machine code holds residues.fmod_inv; numba keys crt.py's cache on crt.py
    # alone, so the edit below (crt.py untouched) would leave _weigh running the old fmod_inv
    site = tmp_path / "site"
    package = _copy_package(site)
    env = {"MODLIN_CACHE_DIR": str(tmp_path / "user")}
    assert _run_in(site, WEIGH, env) == "3.0 4.0 1"  # compiled
    assert _run_in(site, WEIGH, env) == "3.0 4.0 0"  # loaded from the cache
    source = package / "_arith" / "residues.py"
    text = source.read_text()
    anchor = "    r -= m if r >= m else 0.0\n    return r\n"
    assert text.count(anchor) == 1
    source.write_text(text.replace(anchor, "    r -= m if r >= m else 0.0\n    return r + 100.0\n"))
    assert _run_in(site, WEIGH, env) == "103.0 104.0 1"  # compiled afresh, with the edited callee
