"""Build hook: a wheel of modlin carries its numba kernels, compiled where it is built.

``pip install .`` builds a wheel and installs it. After the sources are copied into
the build directory, :class:`BuildPy` runs ``modlin warmup`` on that copy with
``MODLIN_BUILD_KERNELS=1``: every kernel specialisation is compiled into
``modlin/_kernels`` (with a manifest of the numba, numpy and Python versions and a
digest of the sources), so that they are part of the wheel, owned by pip, and a
fresh process's first products load them instead of compiling (see
``modlin/_jit.py``). This takes about a minute.

Skipped for editable installs (their kernels are compiled on first use and cached
per user, as without a wheel) and when ``MODLIN_PRECOMPILE=0``. When it fails the
wheel is built without kernels, with a warning: modlin then compiles them on first
use.
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
        if getattr(self, "editable_mode", False) or os.environ.get("MODLIN_PRECOMPILE", "1") == "0":
            return
        precompile(os.path.abspath(self.build_lib))


def precompile(build_lib: str) -> None:
    target = os.path.join(build_lib, "modlin", "_kernels")
    shutil.rmtree(target, ignore_errors=True)  # a previous build's, for other sources
    with tempfile.TemporaryDirectory(prefix="modlin-build-") as scratch:
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "MODLIN_CACHE_DIR")}
        env.update(PYTHONPATH=os.pathsep.join([build_lib, env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
                   MODLIN_BUILD_KERNELS="1", MODLIN_CACHE_DIR=scratch, PYTHONDONTWRITEBYTECODE="1")
        code = ("import os, sys, modlin\n"
                f"assert os.path.dirname(modlin.__file__) == {os.path.join(build_lib, 'modlin')!r}, modlin.__file__\n"
                "from modlin import _warmup\n"
                "_warmup.ship()\n")
        done = subprocess.run([sys.executable, "-c", code], cwd=scratch, env=env)
    if done.returncode:
        shutil.rmtree(target, ignore_errors=True)
        print("WARNING: modlin's kernels could not be compiled into the wheel; they will be compiled "
              "on first use", file=sys.stderr)


setup(cmdclass={"build_py": BuildPy})
