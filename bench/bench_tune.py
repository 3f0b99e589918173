"""x-tune's HyperBand against the same trials all run to the end, on the real Chinese reviews.

    python examples/prepare_data.py && x-prepro examples/prepro/reviews_char.hjson   # once
    python bench/bench_tune.py [--trials 8] [--epochs 1] [--runs exhaustive:2,hyperband:1,hyperband:2]

The space, base config and tune settings are examples/tune/*.hjson with ``tuner: random``: the random
sampler draws trial n from seed + n, so every study below trains the very same trial configurations;
only the pruner (``none`` for the exhaustive study) and parallel_runs change. Each study is a real
``x-tune`` process (its trials real x-train processes) writing to --out/<pruner>_p<parallel_runs>.

Printed per study: best dev accuracy, training updates spent (the sum over trials of the update each
stopped at: pruned trials stop at an assessment), their share of the exhaustive study's, trials
complete / pruned, and wall time. Goal (docs/tune.md): HyperBand's best within 0.5 points of the
exhaustive best at <= 40% of its updates. A JSON line with every figure ends the output.

    python bench/bench_tune.py --replay outputs/bench_tune/exhaustive_p2/study

replays other pruner settings on the recorded curves of an exhaustive study (no training): the trials
in order, one at a time, each reporting its logged evaluations to the same Optuna pruner x-tune builds
until it says prune. Training is deterministic, so this is what a parallel_runs 1 study would do.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "tune")


def write_configs(folder: str, data_dir: str, trials: int, epochs: int, pruner: str, parallel_runs: int) -> str:
    """tune.hjson (+ train.hjson inheriting the example's) for one study; the path of tune.hjson."""
    os.makedirs(folder, exist_ok=True)
    train = os.path.join(folder, "train.hjson")
    with open(train, "w") as f:
        json.dump({"__parent__": os.path.join(EXAMPLE, "train"), "data_dir": data_dir, "max_epoch": epochs,
                   "viz": False}, f, indent=1)
    tune = os.path.join(folder, "tune.hjson")
    with open(tune, "w") as f:
        json.dump({"__parent__": os.path.join(EXAMPLE, "tune"), "space_config": os.path.join(EXAMPLE, "space"),
                   "base_config": train, "save_dir": os.path.join(folder, "study"), "tuner": "random",
                   "pruner": pruner, "max_trials": trials, "parallel_runs": parallel_runs,
                   "save_above_score": None}, f, indent=1)
    return tune


def run_study(tune: str) -> float:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    started = time.perf_counter()
    code = subprocess.call([sys.executable, "-c", "from xdpx.cli import x_tune; x_tune()", tune], env=env)
    if code != 0:
        raise SystemExit(f"x-tune {tune} failed with exit code {code}")
    return time.perf_counter() - started


def summarize(study: str) -> dict:
    with open(os.path.join(study, "results.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    scores = [float(r["best_accuracy"]) for r in rows if r["best_accuracy"]]
    return {"best": max(scores) if scores else None,
            "updates": sum(int(r["last_step"]) for r in rows if r["last_step"]),
            "complete": sum(r["state"] == "complete" for r in rows),
            "pruned": sum(r["state"] == "pruned" for r in rows),
            "failed": sum(r["state"] == "fail" for r in rows),
            "trials": {r["trial"]: (r["state"], r["best_accuracy"], r["last_step"]) for r in rows}}


def replay(study: str, trials: int, settings: list[tuple[str, float, int]]) -> None:
    import optuna

    sys.path.insert(0, ROOT)
    from xdpx.tune.study import build_pruner

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    curves = []
    for n in range(trials):
        with open(os.path.join(study, f"trial_{n}", "valid.log.tsv")) as f:
            rows = list(csv.DictReader(f, delimiter="\t"))
        curves.append([(int(r["samples"]), float(r["accuracy"])) for r in rows])
    update_size = 64
    full = sum(round(c[-1][0] / update_size) for c in curves)
    print("| pruner | cull_keep_ratio | assess_start_step | best dev accuracy | updates | share of exhaustive |")
    print("| --- | --- | --- | --- | --- | --- |")
    for kind, keep, start in settings:
        spec = {"kind": kind, "min_resource": start, "interval": 50, "max_resource": 440, "keep": keep, "min_ref": 1}
        replayed = optuna.create_study(study_name="x-tune", direction="maximize", pruner=build_pruner(spec))
        spent, best = 0, 0.0
        for curve in curves:
            trial, stopped, trial_best = replayed.ask(), False, 0.0
            for samples, value in curve:
                step = round(samples / update_size)
                trial_best = max(trial_best, value)
                trial.report(value, step)
                if trial.should_prune():
                    stopped = True
                    break
            spent += step
            if stopped:
                replayed.tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                replayed.tell(trial, trial_best)
                best = max(best, trial_best)
        print(f"| {kind} | {keep} | {start} | {best:.4f} | {spent} | {spent / full:.0%} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--runs", default="exhaustive:2,hyperband:1,hyperband:2",
                        help="studies as pruner:parallel_runs (exhaustive = pruner none)")
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "outputs", "data", "reviews_char"))
    parser.add_argument("--out", default=os.path.join(ROOT, "outputs", "bench_tune"))
    parser.add_argument("--replay", default=None, help="an exhaustive study folder: replay pruner settings on it")
    a = parser.parse_args()
    if a.replay:
        return replay(a.replay, a.trials, [(kind, keep, start) for kind in ("hyperband", "successive_halving")
                                           for keep in (0.5, 0.34, 0.25) for start in (50, 100)])
    if not os.path.exists(os.path.join(a.data_dir, "meta.hjson")):
        raise SystemExit(f"{a.data_dir} holds no x-prepro output: run python examples/prepare_data.py && "
                         "x-prepro examples/prepro/reviews_char.hjson")
    results = []
    for spec in a.runs.split(","):
        name, parallel = spec.split(":")
        pruner = "none" if name == "exhaustive" else name
        folder = os.path.join(a.out, f"{name}_p{parallel}")
        if os.path.exists(os.path.join(folder, "study")):
            raise SystemExit(f"{folder}/study exists: remove it or give another --out")
        tune = write_configs(folder, a.data_dir, a.trials, a.epochs, pruner, int(parallel))
        seconds = run_study(tune)
        results.append({"study": name, "parallel_runs": int(parallel), "wall_s": round(seconds, 1),
                        **summarize(os.path.join(folder, "study"))})
    reference = next((r for r in results if r["study"] == "exhaustive"), None)
    print(f"\n{a.trials} trials, {a.epochs} epoch(s) each, same configurations in every study (tuner: random)")
    print("| study | parallel_runs | best dev accuracy | updates | share of exhaustive | complete / pruned | wall time |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        share = f"{r['updates'] / reference['updates']:.0%}" if reference else "-"
        gap = f" ({100 * (r['best'] - reference['best']):+.2f} pt)" if reference and r is not reference else ""
        print(f"| {r['study']} | {r['parallel_runs']} | {r['best']:.4f}{gap} | {r['updates']} | {share} | "
              f"{r['complete']} / {r['pruned']} | {r['wall_s'] / 60:.1f} min |")
    print(json.dumps({"trials": a.trials, "epochs": a.epochs, "results": results}))


if __name__ == "__main__":
    main()
