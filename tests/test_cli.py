"""The ``modlin`` command line: ``plan`` and ``demo``."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

import modlin
from modlin import cli


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
    # demo's default ``out=sys.stdout`` is bound when modlin.cli is imported, which
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
