"""What the first call of each public function costs in a fresh process.

Each case runs in its own interpreter twice per repeat: (a) "cold", with an empty
``MODLIN_CACHE_DIR`` (numba compiles every kernel the path needs), then (b) "warm",
with the directory the cold run filled (numba loads the kernels from it). The
import of modlin and the first call are timed separately; ``specs`` is the number
of compiled specialisations the cold run wrote (``.nbc`` files), and the warm run
must add none. ``modlin demo`` is timed as a whole command, cold and warm.

Repeats are interleaved (every case once, then every case again), and the table
shows medians: on a shared machine a single run can be off by a second.

Run it from the repository root (``python benchmarks/cold_start.py``); ``--cases``
picks cases, ``--repeats`` sets the count, ``--json FILE`` keeps the raw runs.
By default the runs import the checkout, whose kernels are compiled on first use;
``--installed DIR`` imports the copy installed in ``DIR`` instead, as a user's
``pip install .`` does, whose wheel carries kernels compiled when it was built
(``pip install --no-deps --target DIR .`` makes one): "cold" then means an empty
user cache beside those shipped kernels.
Not an asv benchmark: asv times calls inside one process, where only the first
call of the first benchmark would be cold.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
N = 256

#: Per case: the inputs (built after the import, not timed) and the first call.
CASES = {
    "matmul 31-bit": ("p = 2**31 - 1\nA = rng.integers(0, p, (N, N)); B = rng.integers(0, p, (N, N))",
                      "modlin.matmul(A, B, p)"),
    "matmul 50-bit": ("p = 2**50 - 27\nA = rng.integers(0, p, (N, N)); B = rng.integers(0, p, (N, N))",
                      "modlin.matmul(A, B, p)"),
    "matmul 61-bit": ("p = 2**61 - 1\nA = rng.integers(0, p, (N, N)); B = rng.integers(0, p, (N, N))",
                      "modlin.matmul(A, B, p)"),
    "matmul 127-bit": ("p = 2**127 - 1\nA = big(p, 3) % p; B = big(p, 3) % p",
                       "modlin.matmul(A, B, p)"),
    "intmul object 200-bit": ("A = big(2**200, 4) >> 48; B = -(big(2**200, 4) >> 49)",
                              "modlin.intmul(A, B)"),
    "gaussian.matmul 2M": ("p = 2097133  # 21 bits, 1 mod 4\n"
                           "A = (rng.integers(0, p, (N, N)), rng.integers(0, p, (N, N)))\n"
                           "B = (rng.integers(0, p, (N, N)), rng.integers(0, p, (N, N)))",
                           "modlin.gaussian.matmul(A, B, p, algorithm='2m')"),
    "linalg.det 31-bit": ("p = 2**31 - 1\nA = rng.integers(0, p, (N, N))",
                          "modlin.linalg.det(A, p)"),
    "ozaki.zgemm": ("A = rng.standard_normal((N, N)) + 1j * rng.standard_normal((N, N))\n"
                    "B = rng.standard_normal((N, N)) + 1j * rng.standard_normal((N, N))",
                    "modlin.ozaki.zgemm(A, B)"),
}

RUNNER = """
import time
t0 = time.perf_counter()
import json
import numpy as np
t1 = time.perf_counter()
import modlin
t2 = time.perf_counter()
N = {n}
rng = np.random.default_rng(0)
def big(top, words):
    acc = np.zeros((N, N), dtype=object)
    for _ in range(words):
        acc = (acc << 62) | rng.integers(0, 2**62, (N, N)).astype(object)
    return acc
{setup}
t3 = time.perf_counter()
{call}
t4 = time.perf_counter()
{call}
t5 = time.perf_counter()
print(json.dumps({{"numpy": t1 - t0, "import": t2 - t1, "call": t4 - t3, "again": t5 - t4}}))
"""


#: Where the runs import modlin from: the checkout, or ``--installed DIR``.
SITE = ROOT


def _env(cache: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "NUMBA_DEBUG_CACHE")}
    env["MODLIN_CACHE_DIR"] = cache
    env["PYTHONPATH"] = str(SITE) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _specs(cache: str) -> int:
    return sum(1 for _ in pathlib.Path(cache).rglob("*.nbc"))


def run_case(name: str, cache: str) -> dict:
    setup, call = CASES[name]
    code = RUNNER.format(n=N, setup=setup, call=call)
    done = subprocess.run([sys.executable, "-c", code], env=_env(cache), cwd=SITE, capture_output=True,
                          text=True, timeout=900)
    if done.returncode:
        raise RuntimeError(f"{name}: {done.stderr}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    out["specs"] = _specs(cache)
    return out


def run_demo(cache: str) -> dict:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "modlin", "demo"], env=_env(cache), cwd=SITE,
                          capture_output=True, text=True, timeout=900)
    wall = time.perf_counter() - t0
    if done.returncode:
        raise RuntimeError(f"demo: {done.stderr}")
    return {"call": wall, "import": float("nan"), "again": float("nan"), "specs": _specs(cache)}


def measure(names: list[str], repeats: int, demo: bool, log=sys.stderr) -> dict:
    runs: dict[str, dict[str, list[dict]]] = {}
    jobs = list(names) + (["modlin demo"] if demo else [])
    for r in range(repeats):
        for name in jobs:
            cache = tempfile.mkdtemp(prefix="modlin-cold-")
            try:
                fn = run_demo if name == "modlin demo" else (lambda c, name=name: run_case(name, c))
                cold = fn(cache)
                warm = fn(cache)
                if warm["specs"] != cold["specs"]:
                    warm["recompiled"] = warm["specs"] - cold["specs"]
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            runs.setdefault(name, {"cold": [], "warm": []})
            runs[name]["cold"].append(cold)
            runs[name]["warm"].append(warm)
            print(f"[{r + 1}/{repeats}] {name}: cold {cold['call']:.2f} s, warm {warm['call']:.2f} s",
                  file=log, flush=True)
    return runs


def table(runs: dict) -> str:
    def med(xs, key):
        return statistics.median(x[key] for x in xs)

    rows = ["| case (n = 256) | import cold | first call cold | import warm | first call warm | second call "
            "| specs |", "|---|---:|---:|---:|---:|---:|---:|"]
    for name, r in runs.items():
        ic, iw = med(r["cold"], "import"), med(r["warm"], "import")
        imp_c = "" if ic != ic else f"{ic:.2f} s"  # NaN: the demo is timed whole
        imp_w = "" if iw != iw else f"{iw:.2f} s"
        ag = med(r["warm"], "again")
        again = "" if ag != ag else f"{ag:.2f} s"
        flag = " (recompiled!)" if any("recompiled" in w for w in r["warm"]) else ""
        rows.append(f"| {name} | {imp_c} | {med(r['cold'], 'call'):.2f} s | {imp_w} | "
                    f"{med(r['warm'], 'call'):.2f} s{flag} | {again} | {int(med(r['cold'], 'specs'))} |")
    n = len(next(iter(runs.values()))["cold"])
    rows.append("")
    rows.append(f"median of {n}; each cell a fresh process; 'modlin demo' is the whole command (n = 512, import "
                "included); second call = the same call again in the warm process (the work itself); specs = "
                "numba specialisations the cold run compiled")
    return "\n".join(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES), metavar="CASE")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-demo", action="store_true")
    ap.add_argument("--json", type=pathlib.Path, default=None, help="write the raw runs here")
    ap.add_argument("--installed", type=pathlib.Path, default=None, metavar="DIR",
                    help="import modlin from DIR (pip install --no-deps --target DIR .), not the checkout")
    args = ap.parse_args(argv)
    global SITE
    if args.installed is not None:
        SITE = args.installed.resolve()
    runs = measure(args.cases, args.repeats, not args.no_demo)
    if args.json:
        args.json.write_text(json.dumps(runs, indent=1))
    print(textwrap.dedent(table(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
