"""The package is in layers, one folder each, and each imports only the layers below it
(imports inside functions count): the public face (``modlin``, ``gaussian``, ``ozaki``,
``linalg``), ``_front``, ``_algorithms``, ``_planning``, ``_arith``, ``_engines``,
``_runtime``. No module imports, at any depth, a module that imports it back, nothing in
the library imports the tools, and the longest chain of imports between units (a
top-level module or a direct subfolder of ``modlin``) is at most 10 units."""

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
    assert "modlin._planning.plan" in graph["modlin._algorithms.multiword"]
    assert "modlin._arith.moduli" in graph["modlin._planning.rnsplan"]


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


#: The units from the top down: each may import only units further down the list (and
#: the modules of its own folder). ``modlin.__main__`` runs the command, ``modlin._tools``
#: holds it beside the library, ``modlin`` (the package's ``__init__``) gathers the public
#: face; ``modlin.typing`` imports nothing and is open to every layer.
LAYERS = (("modlin.__main__",), ("modlin._tools",), ("modlin",), ("modlin.gaussian", "modlin.ozaki", "modlin.linalg"),
          ("modlin._front",), ("modlin._algorithms",), ("modlin._planning",), ("modlin._arith",),
          ("modlin._engines",), ("modlin._runtime",))
ANYWHERE = ("modlin.typing",)


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _units(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    units: dict[str, set[str]] = {}
    for m, targets in graph.items():
        units.setdefault(_unit(m), set()).update(_unit(t) for t in targets if _unit(t) != _unit(m))
    return units


def _upward(graph: dict[str, set[str]]) -> list[str]:
    rank = {u: i for i, layer in enumerate(LAYERS) for u in layer}
    return sorted(f"{m} imports {t}" for m, targets in graph.items() for t in targets
                  if _unit(t) not in ANYWHERE and _unit(m) != _unit(t) and rank[_unit(m)] >= rank[_unit(t)])


def _longest_chain(units: dict[str, set[str]]) -> list[str]:
    best: dict[str, list[str]] = {}

    def chain(u: str, path: tuple[str, ...] = ()) -> list[str]:
        assert u not in path, f"a circle: {path + (u,)}"
        if u not in best:
            best[u] = [u] + max((chain(v, path + (u,)) for v in units.get(u, ())), key=len, default=[])
        return best[u]

    return max((chain(u) for u in units), key=len)


def test_every_module_belongs_to_a_layer():
    known = {u for layer in LAYERS for u in layer} | set(ANYWHERE)
    assert {_unit(m) for m in _graph()} <= known


def test_each_layer_imports_only_the_layers_below_it():
    assert _upward(_graph()) == []


def test_the_layer_check_sees_an_upward_import():
    graph = {"modlin._arith.crt": {"modlin._algorithms.rns"}, "modlin._algorithms.rns": {"modlin._arith.crt"}}
    assert _upward(graph) == ["modlin._arith.crt imports modlin._algorithms.rns"]


def test_the_longest_import_chain_is_at_most_ten_units():
    chain = _longest_chain(_units(_graph()))
    assert len(chain) <= 10, " -> ".join(chain)
    assert len(_longest_chain({"a": {"b"}, "b": {"c", "d"}, "d": {"e"}})) == 4  # a, b, d, e
