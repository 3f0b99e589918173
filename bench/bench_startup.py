"""Start-up time of a console script: ``x-train --help`` (or any command line) in fresh interpreters.

    python bench/bench_startup.py --runs 20                                  # this checkout
    python bench/bench_startup.py --runs 20 --trees ../before .              # two checkouts, alternating

Each run is a new Python process that imports the package from the given tree (its folder first on
sys.path) and calls the console script's entry function, as the installed ``x-train`` does. The trees
alternate run by run, so a change of load hits both sides alike. Printed per tree: the median and the
fastest wall time, and what the command imported (modules of the package, all modules, whether torch and
numpy were among them).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

RUN = """import sys, json
sys.path.insert(0, sys.argv[1])
entry, sys.argv = sys.argv[2], [sys.argv[2]] + sys.argv[3:]  # argv[0]: the program, as a console script has it
from xdpx import cli
try:
    getattr(cli, entry)()
except SystemExit:
    pass
mods = [m for m in sys.modules if m == "xdpx" or m.startswith("xdpx.")]
print(json.dumps({"xdpx": len(mods), "all": len(sys.modules), "torch": "torch" in sys.modules,
                  "numpy": "numpy" in sys.modules}), file=sys.stderr)
"""


def one_run(tree: Path, entry: str, argv: list[str]) -> tuple[float, dict]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", RUN, str(tree), entry, *argv], cwd=tree, capture_output=True,
                          text=True, check=True)
    seconds = time.perf_counter() - start
    return seconds, json.loads(done.stderr.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trees", nargs="+", type=Path, default=[Path(__file__).resolve().parents[1]],
                        help="checkouts to compare (each holds xdpx/); default: this one")
    parser.add_argument("--runs", type=int, default=10, help="runs per tree")
    parser.add_argument("--entry", default="x_train", help="the entry function in xdpx/cli.py")
    parser.add_argument("args", nargs="*", default=["--help"], help="the command's arguments (default: --help)")
    args = parser.parse_args(argv)
    times: dict[Path, list[float]] = {tree: [] for tree in args.trees}
    imported: dict[Path, dict] = {}
    for _ in range(args.runs):
        for tree in args.trees:
            seconds, imported[tree] = one_run(tree.resolve(), args.entry, args.args)
            times[tree].append(seconds)
    print(f"{args.entry} {' '.join(args.args)}: {args.runs} runs a tree, trees alternating")
    print("| tree | median s | fastest s | xdpx modules | all modules | torch | numpy |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for tree, values in times.items():
        seen = imported[tree]
        print(f"| {tree} | {statistics.median(values):.3f} | {min(values):.3f} | {seen['xdpx']} | {seen['all']} | "
              f"{seen['torch']} | {seen['numpy']} |")


if __name__ == "__main__":
    main()
