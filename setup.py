"""Build hook: a wheel of modlin carries its numba kernels, compiled where it is built.

``pip install .`` builds a wheel and installs it. After the sources are copied into
the build directory, :class:`BuildPy` runs ``modlin warmup`` on that copy with
``MODLIN_BUILD_KERNELS=1``: every kernel specialisation is compiled into
``modlin/_kernels`` (with a manifest of the numba, numpy and Python versions and a
digest of the sources), so that they are part of the wheel, owned by pip, and a
fresh process's first products load them instead of compiling (see
``modlin/_jit.py``). This takes about a minute.

An editable install (``pip install -e .``) has no wheel to carry them: its kernels
live in the per-user cache, keyed on the checkout's path. So :class:`BuildPy` runs
``modlin warmup`` on the checkout itself, into that cache, and a newcomer's first
calls after ``pip install -e ".[test]"`` load them instead of compiling (a tiled
61-bit product in a fresh process once took 14-18 s there). Both are skipped when
``MODLIN_PRECOMPILE=0``. When one fails the install goes on, with a warning:
modlin then compiles the kernels on first use.
"""

import os
import shutil
import subprocess
import sys
import tempfile

from setuptools import setup
from setuptools.command.build_py import build_py


class BuildPy(build_py):
    def run(self):
        super().run()
        if os.environ.get("MODLIN_PRECOMPILE", "1") == "0":
            return
        if getattr(self, "editable_mode", False):
            warm_checkout(os.path.dirname(os.path.abspath(__file__)))
        else:
            precompile(os.path.abspath(self.build_lib))


def warm_checkout(root: str) -> None:
    """``modlin warmup`` of the checkout at ``root`` (an editable install's package) into the
    user's kernel cache, where its processes look them up."""
    env = {k: v for k, v in os.environ.items() if k != "MODLIN_BUILD_KERNELS"}
    env.update(PYTHONPATH=os.pathsep.join([root, env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
               PYTHONDONTWRITEBYTECODE="1")
    code = ("import os, sys, modlin\n"
            f"assert os.path.dirname(modlin.__file__) == {os.path.join(root, 'modlin')!r}, modlin.__file__\n"
            "from modlin._tools import warmup as _warmup\n"
            "_warmup.warmup(quiet=True)\n")
    with tempfile.TemporaryDirectory(prefix="modlin-warmup-") as scratch:
        done = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env)
    if done.returncode:
        print("WARNING: modlin's kernels could not be compiled ahead for this editable install; they will "
              "be compiled on first use", file=sys.stderr)


def precompile(build_lib: str) -> None:
    target = os.path.join(build_lib, "modlin", "_kernels")
    shutil.rmtree(target, ignore_errors=True)  # a previous build's, for other sources
    with tempfile.TemporaryDirectory(prefix="modlin-build-") as scratch:
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "MODLIN_CACHE_DIR")}
        env.update(PYTHONPATH=os.pathsep.join([build_lib, env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                   MODLIN_BUILD_KERNELS="1", MODLIN_CACHE_DIR=scratch, PYTHONDONTWRITEBYTECODE="1")
        code = ("import os, sys, modlin\n"
                f"assert os.path.dirname(modlin.__file__) == {os.path.join(build_lib, 'modlin')!r}, modlin.__file__\n"
                "from modlin._tools import warmup as _warmup\n"
                "_warmup.ship()\n")
        done = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env)
    if done.returncode:
        shutil.rmtree(target, ignore_errors=True)
        print("WARNING: modlin's kernels could not be compiled into the wheel; they will be compiled "
              "on first use", file=sys.stderr)


setup(cmdclass={"build_py": BuildPy})
