"""pytest's collection of the doctests (``--doctest-modules``, ``*.rst``): the pages and
modules that need dask, an optional dependency, are left out when it is not installed."""

import importlib.util


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a parent package missing, or a module set to None
        return False


collect_ignore = [] if _installed("dask.array") else ["modlin/_dask.py", "docs/guide/distributed.rst"]
