"""The ``modlin`` command line: ``plan``, ``demo`` and ``warmup``."""

from __future__ import annotations

import io
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import modlin
from modlin._tools import cli


def test_plan_prints_explain(capsys):
    rc = cli.main(["plan", "2147483647", "--shape", "64", "64", "64"])
    out, err = capsys.readouterr()
    assert rc == 0
    assert out == modlin.plan(2**31 - 1, 64, 64, 64).explain() + "\n"
    assert "p = 2147483647 (31 bits)" in out and "lambda" in out and err == ""


def test_plan_with_engine(capsys):
    rc = cli.main(["plan", "251", "--shape", "8", "300", "8", "--engine", "fp32"])
    out, _ = capsys.readouterr()
    assert rc == 0
    pl = modlin.plan(251, 8, 300, 8, engine="fp32")
    assert out.strip() == pl.explain() and "fp32" in out and f"lambda = {pl.block}" in out


@pytest.mark.parametrize("argv, msg", [
    (["plan", "1", "--shape", "4", "4", "4"], "at least 2"),
    (["plan", "0"], "at least 2"),
    (["plan", str(2**52), "--shape", "4", "4", "4", "--algorithm", "multiword"], "2**52"),
    (["plan", "16777213", "--shape", "4", "4", "4", "--engine", "fp32", "--algorithm", "multiword"],
     "no exact plan"),
])
def test_bad_modulus_exit_code_2(argv, msg, capsys):
    rc = cli.main(argv)
    out, err = capsys.readouterr()
    assert rc == 2
    assert err.startswith("modlin: error:") and msg in err
    assert out == ""


@pytest.mark.parametrize("argv", [["plan", "abc"], ["plan", "7.5"], ["plan"], ["frobnicate"],
                                  ["plan", "7", "--engine", "fp16"]])
def test_unparsable_arguments_exit_code_2(argv, capsys):
    with pytest.raises(SystemExit) as info:
        cli.main(argv)
    assert info.value.code == 2
    assert "usage" in capsys.readouterr().err


@pytest.mark.parametrize("n", ["0", "-3"])
def test_demo_refuses_empty_sizes(n, capsys):
    """demo -n 0 used to check a 0x0 corner and call it exact."""
    with pytest.raises(SystemExit) as info:
        cli.main(["demo", "-n", n])
    assert info.value.code == 2
    out, err = capsys.readouterr()
    assert out == "" and f"argument -n: must be at least 1, got {int(n)}" in err
    with pytest.raises(ValueError, match="demo needs check >= 1"):
        cli.demo(n=4, check=0, out=io.StringIO())


def test_plan_of_an_empty_product_costs_nothing(capsys):
    rc = cli.main(["plan", "65521", "--shape", "0", "5", "5"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    assert "cost      : none (the product is empty)" in out and "625" not in out
    assert "the product is empty (m = 0: the result is 0x5), so no GEMM or element-wise pass runs" in out


def test_demo_is_exact():
    buf = io.StringIO()
    failures = cli.demo(n=64, check=16, seed=3, out=buf)
    text = buf.getvalue()
    assert failures == 0
    assert "WRONG" not in text
    for p in cli.DEMO_PRIMES:
        line = next(ln for ln in text.splitlines() if ln.split() and ln.split()[0] == str(p))
        assert line.rstrip().endswith("exact")


def test_demo_command():
    # demo's default ``out=sys.stdout`` is bound when modlin._tools.cli is imported, which
    # pytest's capturing cannot follow: run the command in its own process
    r = subprocess.run([sys.executable, "-m", "modlin", "demo", "-n", "24"], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert "WRONG" not in r.stdout
    assert sum(ln.rstrip().endswith("exact") for ln in r.stdout.splitlines()) == len(cli.DEMO_PRIMES)


def test_python_dash_m():
    r = subprocess.run([sys.executable, "-m", "modlin", "plan", "65521", "--shape", "4", "4", "4"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == modlin.plan(65521, 4, 4, 4).explain()
    r = subprocess.run([sys.executable, "-m", "modlin", "plan", "1"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "modlin: error" in r.stderr


def test_bench_ozaki_tables():
    # the tables' own code paths, at sizes that take seconds (the real ones take minutes)
    r = subprocess.run([sys.executable, "-m", "modlin", "bench", "--table", "ozaki", "--sizes", "48",
                        "--repeats", "1"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if ln.startswith("| 48 |")]
    assert any("ozaki.zgemm" in ln and "| 2m |" in ln for ln in rows) and any("ozaki.dgemm" in ln for ln in rows)
    r = subprocess.run([sys.executable, "-m", "modlin", "bench", "--table", "ozaki-accuracy"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "numpy.matmul float64" in r.stdout and "zgemm" in r.stdout


def test_tables_write_to_the_streams_of_the_call(capsys):
    # the defaults are sys.stdout and sys.stderr as they are when the table writes (capsys
    # replaced them after the import), not as they were at the import
    from modlin._tools import cli
    from modlin._tools.bench.integers import run_bigprime_table

    run_bigprime_table(sizes=(6,), bits=(127,), functions=("det",), repeats=1, flint=False)
    out, err = capsys.readouterr()
    assert "| 127-bit | 6 | det |" in out and "bigprime: det 127 bits n=6" in err
    assert "bigprime: det" not in out
    assert cli.demo(n=24, check=8) == 0
    assert "modlin" in capsys.readouterr().out


def test_bench_integers_and_bigprime_tables(capsys):
    # every row of both tables at sizes that take seconds, python-flint beside, the answers compared
    from modlin._tools.bench.integers import run_bigprime_table, run_integers_table

    out, progress = io.StringIO(), io.StringIO()
    run_integers_table(sizes=(12,), repeats=1, out=out, progress=progress)
    rows = [ln for ln in out.getvalue().splitlines() if ln.startswith("| ") and "| 12 |" in ln]
    assert [ln.split(" | ")[0][2:] for ln in rows] == ["det", "solve, 1 rhs", "solve, 50 rhs", "rank", "charpoly"]
    assert all(" | yes | " in ln for ln in rows), rows
    out = io.StringIO()
    run_bigprime_table(sizes=(10,), bits=(127, 200), repeats=1, out=out, progress=progress)
    rows = [ln for ln in out.getvalue().splitlines() if ln.startswith("| 127-bit") or ln.startswith("| 200-bit")]
    assert len(rows) == 10 and all(ln.endswith("| yes |") for ln in rows), rows
    assert cli.main(["bench", "--table", "bigprime", "--sizes", "8", "--bits", "70", "--functions", "rank", "matmul",
                     "--repeats", "1", "--no-flint"]) == 0
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("| 70-bit")]
    assert [ln.split(" | ")[2] for ln in rows] == ["rank", "matmul"], rows
    assert cli.main(["bench", "--table", "bigprime", "--functions", "charpoly"]) == 2  # before any row runs
    assert "the bigprime table has no ['charpoly'] rows" in capsys.readouterr().err
    assert cli.main(["bench", "--table", "linalg", "--functions", "matmul"]) == 2
    assert "the linalg table has no ['matmul'] rows" in capsys.readouterr().err
    r = subprocess.run([sys.executable, "-m", "modlin", "bench", "--table", "integers", "--sizes", "8", "--repeats",
                        "1", "--no-flint"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "| det | 8 |" in r.stdout and "| - | - |" in r.stdout  # no flint columns
    out = io.StringIO()
    run_integers_table(sizes=(9,), cases=["solve", "charpoly"], repeats=1, out=out, progress=progress)
    rows = [ln.split(" | ")[0][2:] for ln in out.getvalue().splitlines() if "| 9 |" in ln]
    assert rows == ["solve, 1 rhs", "solve, 50 rhs", "charpoly"]
    with pytest.raises(ValueError, match="no integers-table rows"):
        run_integers_table(sizes=(9,), cases=["eig"], out=out, progress=progress)


def test_bench_scale_table():
    # one row at a size that takes seconds: both budgets, every column filled
    from modlin._tools.bench.scale import SCALE_CASES, run_scale_table

    out, progress = io.StringIO(), io.StringIO()
    rows = run_scale_table(sizes=(200,), memory="1MiB", repeats=1, cases=SCALE_CASES[:1], out=out, progress=progress)
    assert [r["budget"] for r in rows] == [None, "1MiB"] and not any("error" in r for r in rows)
    assert rows[0]["tiles"] == 1 < rows[1]["tiles"]  # the small budget cuts it into tiles
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("| 2^31-1 | 200 |"))
    cells = [c.strip() for c in line.split("|")[1:-1]]
    assert len(cells) == 11 and "error" not in line
    assert cells[-1] == f"{rows[1]['ratio'] / rows[0]['ratio']:.2f}"  # vs default


def test_bench_scale_table_rounds():
    # two children per budget, alternately: every pair's ratio pooled, the largest peak
    from modlin._tools.bench import scale as _bench_scale
    from modlin._tools.bench.scale import SCALE_CASES, run_scale_table

    calls = []
    fake = iter([dict(ratios=[2.0, 4.0], first=1.0, peak=10, result=8, tiles=1),
                 dict(ratios=[3.0], first=1.5, peak=12, result=8, tiles=3),
                 dict(ratios=[5.0], first=1.2, peak=30, result=8, tiles=1),
                 dict(ratios=[3.5], first=0.9, peak=11, result=8, tiles=3)])

    def row(kind, arg, n, repeats, budget):
        calls.append(budget)
        return next(fake)

    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_bench_scale, "_row", row)
        rows = run_scale_table(sizes=(64,), memory="1MiB", repeats=1, cases=SCALE_CASES[:1], out=out,
                               progress=io.StringIO(), rounds=2)
        with pytest.raises(ValueError, match="rounds must be at least 1"):
            run_scale_table(sizes=(64,), cases=SCALE_CASES[:1], out=out, progress=io.StringIO(), rounds=0)
    assert calls == [None, "1MiB", None, "1MiB"]
    base, small = rows
    assert base["ratio"] == 4.0 and base["ratios"] == [2.0, 4.0, 5.0] and base["peak"] == 30
    assert small["ratio"] == 3.25 and small["first"] == 1.2 and small["peak"] == 12 and small["rounds"] == 2
    line = next(ln for ln in out.getvalue().splitlines() if ln.startswith("| 2^31-1 | 64 |"))
    assert line.endswith("| 3.75 | 1 | 3.25 | 1.20 | 1.50 | 3 | 0.81 |")


def test_scale_cases_by_label():
    from modlin._tools.bench.scale import SCALE_CASES, scale_cases

    assert scale_cases(["2^61-1", SCALE_CASES[0]]) == (SCALE_CASES[2], SCALE_CASES[0])
    with pytest.raises(ValueError, match=r"unknown scale case '61-bit'; the cases are 2\^31-1, 50-bit"):
        scale_cases(["61-bit"])
    assert cli.main(["bench", "--table", "scale", "--cases", "61-bit"]) == 2  # before any row runs


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"modlin {modlin.__version__}"


def test_one_version():
    from importlib.metadata import version

    assert version("modlin") == modlin.__version__  # pyproject reads it from the package


def _subcommands():
    ap = cli.parser()
    sub = next(a for a in ap._actions if isinstance(a, __import__("argparse")._SubParsersAction))
    return sub.choices


def test_every_option_has_help():
    for name, sp in _subcommands().items():
        for action in sp._actions:
            assert action.help, f"modlin {name} {action.option_strings or action.dest} has no help text"


def test_reference_describes_the_cli():
    """docs/reference.rst names every subcommand and, for bench, every --table choice."""
    import pathlib

    ref = (pathlib.Path(__file__).parent.parent / "docs" / "reference.rst").read_text()
    subs = _subcommands()
    for name in subs:
        assert f"``modlin {name}" in ref, f"docs/reference.rst does not describe 'modlin {name}'"
    table = next(a for a in subs["bench"]._actions if "--table" in a.option_strings)
    assert f"[--table {{{','.join(table.choices)}}}]" in ref
    for choice in table.choices:
        assert f"**{choice}**" in ref or choice == "all", f"the {choice} table is not described"


# First calls of every public path at other sizes than warmup's; prints the kernels numba compiled.
FIRST_CALLS = """
import sys
import numpy as np
import modlin
from modlin import gaussian, linalg, ozaki

rng = np.random.default_rng(5)
n = 150
for p in (2**31 - 1, 2**50 - 27, 2**61 - 1):
    a = rng.integers(0, p, (n, n))
    modlin.matmul(a, a, p)
big = rng.integers(0, 2**62, (n, n)).astype(object) << 65
modlin.matmul(big, big, 2**127 - 1)
modlin.intmul(big, big)
m = 2097133
g = (rng.integers(0, m, (n, n)), rng.integers(0, m, (n, n)))
gaussian.matmul(g, g, m)
linalg.det(rng.integers(0, 2**31 - 1, (300, 300)), 2**31 - 1)
linalg.det(big[:100, :100] % (2**127 - 1), 2**127 - 1)
w = rng.integers(-50, 50, (40, 40))
linalg.det(w), linalg.solve(w, w[:, :3]), linalg.charpoly(w[:20, :20]), linalg.nullspace(w[:5])
z = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
ozaki.zgemm(z, z)
ozaki.dgemm(z.real, z.imag)
misses = sum(sum(d.stats.cache_misses.values()) for name, mod in list(sys.modules.items())
             if name.startswith("modlin") for d in vars(mod).values()
             if hasattr(d, "stats") and getattr(getattr(d, "py_func", None), "__module__", None) == name)
print(misses)
"""


def _cache_files(root) -> dict[str, float]:
    return {str(f): f.stat().st_mtime_ns for f in root.rglob("*") if f.suffix in (".nbi", ".nbc")}


def _snapshot(source: pathlib.Path, target: pathlib.Path) -> None:
    """Copy a kernel cache that other processes may be writing (a file replaced meanwhile is skipped)."""
    for f in source.rglob("*"):
        if f.is_file():
            (target / f.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
            try:
                shutil.copy2(f, target / f.relative_to(source))
            except FileNotFoundError:
                pass


def test_warmup_compiles_every_path_ahead(tmp_path):
    # Into a private copy of this session's cache: from an empty one it took 70 s of CI, which
    # the wheel build there repeats anyway (it runs the same warmup into an empty directory, and
    # CI then checks that `modlin demo` compiles nothing). Not into the shared cache itself: the
    # other test workers rewrite its index files concurrently, and one that read an index before
    # warmup wrote it drops warmup's entries when it writes its own (a second warmup in CI once
    # compiled again for that reason).
    from modlin._engines.jit import cache_dir

    root = pathlib.Path(modlin.__file__).parent.parent
    shared = pathlib.Path(cache_dir())
    _snapshot(shared, tmp_path / shared.name)
    env = dict(os.environ, MODLIN_CACHE_DIR=str(tmp_path))
    cache = tmp_path / shared.name

    def run(*args):
        r = subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=900, env=env,
                           cwd=root)
        assert r.returncode == 0, r.stderr
        return r

    r = run("-m", "modlin", "warmup")
    assert "modlin warmup" in r.stderr and "ozaki" in r.stderr  # the progress display, on stderr
    assert r.stdout.startswith("modlin warmup:") and "compiled into" in r.stdout
    files = _cache_files(cache)
    indexes = {pathlib.Path(f).name.split("-")[0] for f in files if f.endswith(".nbi")}
    for kernel in ("modular._step", "modular._finalize", "crt._crt_weights", "pyints_cpython._objects_halves",
                   "modular._twom_words_kernel", "_elimination._eliminate", "crt._to_double_kernel"):
        assert kernel in indexes
    # A fresh process's first calls load every kernel they need (counted by the process
    # itself), and warming up again compiles nothing (the private cache's files are unchanged)
    # and, quiet, prints nothing.
    assert run("-c", FIRST_CALLS).stdout.split() == ["0"]
    run_fails = subprocess.run([sys.executable, "-m", "modlin", "warmup", "--jobs", "0"], capture_output=True,
                               text=True, env=env, cwd=root)
    assert run_fails.returncode == 2 and "--jobs: must be at least 1, got 0" in run_fails.stderr
    r = run("-m", "modlin", "warmup", "--quiet", "--jobs", "1")  # the first one ran side by side
    assert r.stdout == "" and r.stderr == ""
    assert _cache_files(cache) == files


def test_warmup_progress_line_without_tqdm(monkeypatch):
    from modlin._runtime import progress as _progress

    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm raises ImportError
    buf = io.StringIO()
    bar = _progress.bar(2, "modlin warmup", "path", buf)
    assert isinstance(bar, _progress._Line)
    for label in ("matmul mod a 31-bit p", "ozaki"):
        bar.set_description(label)
        bar.update(1)
    bar.close()
    text = buf.getvalue()
    assert text.startswith("\rmodlin warmup [0/2] matmul mod a 31-bit p") and "\rmodlin warmup [1/2] ozaki" in text
    assert text.endswith("\n") and text.rstrip().endswith("modlin warmup [2/2] done") and text.count("\n") == 1


def test_warmup_paths_cover_every_public_module():
    from modlin._tools import warmup as _warmup

    labels = [label for label, _ in _warmup.paths()]
    assert len(labels) == len(set(labels))
    for what in ("matmul mod a 31-bit p", "matmul mod a 127-bit p", "every plan mod a 8-bit p", "intmul",
                 "gaussian", "linalg mod a 61-bit p", "ozaki"):
        assert what in labels


def test_spread_calibration_runs_and_reports_its_margins():
    import io

    from modlin._tools.bench import ozaki_tables

    out = io.StringIO()
    rows = ozaki_tables.run_spread_calibration(phis=(0.0, 4.0), shapes=(((6, 100), (100, 5)),), seeds=1, out=out,
                                               progress=io.StringIO())
    assert len(rows) == 2 * 2 * 2  # kinds x phis x engines
    assert {r["extra"] for r in rows if r["phi"] == 0.0} == {0}  # well-scaled: the default suffices
    assert all(r["margin"] is None or r["margin"] > 0 for r in rows)
    assert "ozaki spread calibration: 8 cases" in out.getvalue()
