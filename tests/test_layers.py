"""The package is in layers: no module imports, at any depth and in any function, a
module that imports it back (a circle makes import order matter and layers blur)."""

from __future__ import annotations

import ast
import pathlib

import modlin

ROOT = pathlib.Path(modlin.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for f in ROOT.rglob("*.py"):
        parts = f.relative_to(ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = f
    return out


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        package = m if f.name == "__init__.py" else m.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                subs = [f"{target}.{a.name}" for a in node.names if f"{target}.{a.name}" in mods]
                names = subs or [target]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            graph[m].update(n for n in names if n in mods and n != m)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circles():
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_circles():
    # the check itself can fail: a made-up circle, and the package's own edges are seen
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    graph = _graph()
    assert "modlin._plan" in graph["modlin._multiword"] and "modlin._rns" in graph["modlin._rnsplan"]


def test_nothing_in_the_library_imports_the_tools():
    """The command, warmup and bench tables (``modlin._tools``) sit beside the library:
    only ``modlin.__main__`` (``python -m modlin``) and the tools themselves import them."""
    graph = _graph()
    tools = {m for m in graph if m == "modlin._tools" or m.startswith("modlin._tools.")}
    assert {"modlin._tools.cli", "modlin._tools.warmup", "modlin._tools.bench.products"} <= tools
    offenders = {m: sorted(graph[m] & tools) for m in graph
                 if m not in tools and m != "modlin.__main__" and graph[m] & tools}
    assert offenders == {}, offenders
    assert "modlin._tools.cli" in graph["modlin.__main__"]  # the check sees the edge it allows
