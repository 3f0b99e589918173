"""x-tune's HyperBand against the same trials all run to the end, on the real Chinese reviews.

    python examples/prepare_data.py && x-prepro examples/prepro/reviews_char.hjson   # once
    python bench/bench_tune.py [--trials 32] [--seed 1] [--runs exhaustive:2,hyperband:2,hyperband:1]

The space, base config and tune settings are examples/tune/*.hjson with ``tuner: random``: the random
sampler draws trial n from seed + n, so every study of one --seed trains the very same trial
configurations (another --seed: an independent set); only the pruner (``none`` for the exhaustive study)
and parallel_runs change. Each study is a real ``x-tune`` process (its trials real x-train processes)
writing to --out/seed<seed>/<pruner>_p<parallel_runs>; its wall time and the load average before and
after go to bench.json there. ``--resume`` goes on with unfinished studies (x-tune resumes them; the wall
times of the parts add up), so a long study can be run in parts; ``--report`` only prints the table of
the studies already in --out/seed<seed>.

Printed: the machine (CPU model, cores, torch threads per trial, load average), then per study the best
dev accuracy, the training updates spent (the sum over trials of the updates each trained, results.tsv's
``updates``: pruned trials stop at an assessment), their share of the exhaustive study's, trials
complete / pruned, wall time.
Goal (docs/tune.md): HyperBand's best within 0.5 points of the exhaustive best at <= 40% of its updates.
A JSON line with every figure ends the output.

    python bench/bench_tune.py --replay outputs/bench_tune/seed1/exhaustive_p2/study \\
        [--settings hyperband:3:50,successive_halving:3:50]

replays pruner settings (pruner:reduction_factor:assess_start_step[:min_ref]) on the recorded curves of
an exhaustive study (no training): the trials in order, one at a time, each reporting its logged
evaluations to the pruner x-tune builds (xdpx.tune.study.build_pruner), at the steps x-tune reports them
(xdpx.tune.reporter.report_step), until it says prune. Training is deterministic for a given number of
torch threads, so this is what a study with those settings would do one trial at a time with the
exhaustive study's threads per trial (x-tune gives a trial cores / parallel_runs threads, and another
thread count changes the scores in the last digits, enough to flip a close rung decision); it is a
replay, not a measurement, and is labelled so.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "tune")
BENCH_FILE = "bench.json"
GOAL_POINTS, GOAL_SHARE = 0.5, 0.40


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or "unknown"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def threads_per_trial(parallel_runs: int) -> int:
    """What x-tune's runner gives each trial on the CPU (xdpx/tune/runner.py): OMP_NUM_THREADS if set."""
    if "OMP_NUM_THREADS" in os.environ:
        return int(os.environ["OMP_NUM_THREADS"])
    return max(1, (os.cpu_count() or 1) // parallel_runs)


def write_configs(folder: str, data_dir: str, trials: int, epochs: int, pruner: str, parallel_runs: int,
                  seed: int, keep: float | None = None) -> str:
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
                   "pruner": pruner, "max_trials": trials, "parallel_runs": parallel_runs, "seed": seed,
                   "save_above_score": None, **({"cull_keep_ratio": keep} if keep else {})}, f, indent=1)
    return tune


def run_study(tune: str, folder: str) -> None:
    """One x-tune process (a part of the study when it was interrupted before); its time in bench.json."""
    record_path = os.path.join(folder, BENCH_FILE)
    record = json.load(open(record_path)) if os.path.exists(record_path) else {"parts": []}
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, os.environ.get("PYTHONPATH", "")])}
    part = {"started_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "load_before": load_average()}
    started = time.perf_counter()
    code = subprocess.call([sys.executable, "-c", "from xdpx.cli import x_tune; x_tune()", tune], env=env)
    part.update(wall_s=round(time.perf_counter() - started, 1), load_after=load_average(), exit_code=code)
    record["parts"].append(part)
    with open(record_path, "w") as f:
        json.dump(record, f, indent=1)
    if code != 0:
        raise SystemExit(f"x-tune {tune} failed with exit code {code} (bench --resume goes on with it)")


def summarize(study: str) -> dict:
    with open(os.path.join(study, "results.tsv")) as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    done = [r for r in rows if r["state"] == "complete" and r["best_accuracy"]]
    best = max(done, key=lambda r: float(r["best_accuracy"]), default=None)
    return {"best": float(best["best_accuracy"]) if best else None, "best_trial": int(best["trial"]) if best else None,
            "updates": sum(int(r["updates"]) for r in rows if r["updates"]),
            "complete": sum(r["state"] == "complete" for r in rows),
            "pruned": sum(r["state"] == "pruned" for r in rows),
            "failed": sum(r["state"] == "fail" for r in rows),
            "trials": {r["trial"]: (r["state"], r["best_accuracy"], r["last_step"]) for r in rows}}


def study_result(folder: str, name: str, parallel: int) -> dict:
    with open(os.path.join(folder, BENCH_FILE)) as f:
        parts = json.load(f)["parts"]
    return {"study": name, "parallel_runs": parallel, "threads_per_trial": threads_per_trial(parallel),
            "wall_s": round(sum(p["wall_s"] for p in parts), 1), "parts": parts,
            **summarize(os.path.join(folder, "study"))}


def print_table(results: list[dict], trials: int, epochs: int, seed: int) -> None:
    reference = next((r for r in results if r["study"] == "exhaustive"), None)
    print(f"\n{trials} trials (seed {seed}), {epochs} epoch(s) each, the same configurations in every study "
          "(tuner: random)")
    print("| study | parallel_runs | torch threads per trial | best dev accuracy | updates | share of exhaustive "
          "| complete / pruned | wall time | load average before -> after |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        share = f"{r['updates'] / reference['updates']:.0%}" if reference else "-"
        gap = f", {100 * (r['best'] - reference['best']):+.2f} pt" if reference and r is not reference else ""
        loads = "; ".join(f"{p['load_before']} -> {p['load_after']}" for p in r["parts"])
        parts = f" ({len(r['parts'])} parts)" if len(r["parts"]) > 1 else ""
        print(f"| {r['study']} | {r['parallel_runs']} | {r['threads_per_trial']} | {r['best']:.4f} "
              f"(trial {r['best_trial']}{gap}) | {r['updates']} | {share} | {r['complete']} / {r['pruned']} | "
              f"{r['wall_s'] / 60:.1f} min{parts} | "
              f"{loads} |")
    if reference:
        for r in results:
            if r is reference:
                continue
            points, share = 100 * (reference["best"] - r["best"]), r["updates"] / reference["updates"]
            met = points <= GOAL_POINTS and share <= GOAL_SHARE
            print(f"goal ({r['study']}, parallel_runs {r['parallel_runs']}): {points:.2f} points below the exhaustive "
                  f"best (<= {GOAL_POINTS}), {share:.1%} of its updates (<= {GOAL_SHARE:.0%}): "
                  f"{'met' if met else 'NOT met'}")


def parse_setting(text: str) -> dict:
    kind, factor, start, *rest = text.split(":")
    return {"kind": kind, "keep": 1 / int(factor), "min_resource": int(start), "min_ref": int(rest[0]) if rest else 1}


def replay(study: str, settings: list[dict], assess: str = "last") -> None:
    """Replay pruner settings on the recorded curves of an exhaustive study (one trial at a time);
    ``assess``: what a trial reports at each assessment, its latest score or its best so far."""
    import optuna

    sys.path.insert(0, ROOT)
    from xdpx.tune.reporter import report_step
    from xdpx.tune.study import build_pruner

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    with open(os.path.join(study, "results.tsv")) as f:
        numbers = sorted(int(r["trial"]) for r in csv.DictReader(f, delimiter="\t"))
    with open(os.path.join(os.path.dirname(study), "tune.hjson")) as f:
        interval = json.load(f).get("assess_interval", 50)
    logs = []
    for n in numbers:
        with open(os.path.join(study, f"trial_{n}", "valid.log.tsv")) as f:
            logs.append([(int(r["samples"]), float(r["accuracy"]), int(r["step"]))
                         for r in csv.DictReader(f, delimiter="\t")])
    size = logs[0][0][0] // logs[0][0][2]  # samples of one update (the first evaluation comes before any short batch)
    max_resource = max(math.ceil(log[-1][0] / size) for log in logs)  # what x-tune passes as the updates of a trial
    full = sum(round(log[-1][0] / size) for log in logs)  # every trial to its end: the updates it trained
    exhaustive = max(value for log in logs for _, value, _ in log)
    print(f"REPLAY (not a measurement) of {len(logs)} recorded trials of {study}: exhaustive best {exhaustive:.4f}, "
          f"{full} updates; each trial reports its {'best score so far' if assess == 'best' else 'latest score'}")
    # why pruning can or cannot keep the best: where the trials within GOAL_POINTS of the best rank at each
    # evaluation (among all trials at that evaluation)
    steps = [step for _, _, step in logs[0]]  # updates done (the reported steps are snapped to these)
    for n, log in enumerate(logs):
        if max(v for _, v, _ in log) < exhaustive - GOAL_POINTS / 100:
            continue
        ranks = [1 + sum(other[i][1] > log[i][1] for other in logs if len(other) > i) for i in range(len(log))]
        print(f"trial {numbers[n]} (best {max(v for _, v, _ in log):.4f}) ranks "
              + ", ".join(f"{r} at {s}" for r, s in zip(ranks, steps)) + f" of {len(logs)}")
    print("| pruner | reduction factor | assess_start_step | min_ref | best dev accuracy | updates | share of exhaustive "
          "| complete / pruned |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for setting in settings:
        if setting["min_resource"] % interval:
            raise SystemExit(f"assess_start_step {setting['min_resource']} is not a multiple of the study's "
                             f"assess_interval {interval}: x-tune refuses it, and its evaluations are not at its rungs")
        spec = {**setting, "interval": interval, "max_resource": max_resource}
        replayed = optuna.create_study(study_name="x-tune", direction="maximize", pruner=build_pruner(spec))
        spent, best, pruned = 0, 0.0, 0
        start, deviation = setting["min_resource"], interval * size // 2
        for log in logs:
            trial, stopped, trial_best, last = replayed.ask(), False, 0.0, 0
            for samples, value, _ in log:
                trial_best = max(trial_best, value)
                # reported where the trial's reporter reports it (xdpx/tune/reporter.py)
                step = report_step(samples, size, start, interval, deviation, max_resource)
                if step is None:
                    continue
                trial.report(trial_best if assess == "best" else value, step)
                last = step
                if trial.should_prune():
                    stopped = True
                    break
            # the updates trained: to the rung where it was pruned, else to its end (as the real studies count)
            spent += last if stopped else round(log[-1][0] / size)
            if stopped:
                pruned += 1
                replayed.tell(trial, state=optuna.trial.TrialState.PRUNED)
            else:
                replayed.tell(trial, trial_best)
                best = max(best, trial_best)
        gap = f" ({100 * (best - exhaustive):+.2f} pt)" if best != exhaustive else ""
        print(f"| {spec['kind']} | {round(1 / spec['keep'])} | {spec['min_resource']} | {spec['min_ref']} | "
              f"{best:.4f}{gap} | {spent} | {spent / full:.0%} | {len(logs) - pruned} / {pruned} |")


DEFAULT_SETTINGS = ",".join(f"{kind}:{factor}:{start}" for kind in ("hyperband", "successive_halving")
                            for factor in (2, 3, 4) for start in (50, 100))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seed", type=int, default=1, help="sampler seed: another seed, another set of trials")
    parser.add_argument("--runs", default="exhaustive:2,hyperband:2,hyperband:1",
                        help="studies as pruner:parallel_runs (exhaustive = pruner none)")
    parser.add_argument("--data-dir", default=os.path.join(ROOT, "outputs", "data", "reviews_char"))
    parser.add_argument("--out", default=os.path.join(ROOT, "outputs", "bench_tune"))
    parser.add_argument("--cull-keep-ratio", type=float, default=None,
                        help="instead of examples/tune's 0.34 (reduction factor 3); the folders get a _keep<ratio> suffix")
    parser.add_argument("--resume", action="store_true", help="go on with studies already in --out")
    parser.add_argument("--report", action="store_true", help="only print the table of the studies in --out")
    parser.add_argument("--replay", default=None, help="an exhaustive study folder: replay pruner settings on it")
    parser.add_argument("--settings", default=DEFAULT_SETTINGS,
                        help="--replay: pruner:reduction_factor:assess_start_step[:min_ref], comma separated")
    parser.add_argument("--assess", choices=["last", "best"], default="last",
                        help="--replay: what a trial reports at an assessment, its latest score or its best so far")
    a = parser.parse_args()
    if a.replay:
        return replay(a.replay, [parse_setting(s) for s in a.settings.split(",")], a.assess)
    if not a.report and not os.path.exists(os.path.join(a.data_dir, "meta.hjson")):
        raise SystemExit(f"{a.data_dir} holds no x-prepro output: run python examples/prepare_data.py && "
                         "x-prepro examples/prepro/reviews_char.hjson")
    import torch

    print(f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC; CPU: {cpu_model()}, {os.cpu_count()} cores; "
          f"torch {torch.__version__}; load average {load_average()}")
    results = []
    for spec in a.runs.split(","):
        name, parallel = spec.split(":")
        pruner = "none" if name == "exhaustive" else name
        suffix = f"_keep{a.cull_keep_ratio}" if a.cull_keep_ratio and name != "exhaustive" else ""
        folder = os.path.join(a.out, f"seed{a.seed}", f"{name}_p{parallel}{suffix}")
        if not a.report:
            if os.path.exists(os.path.join(folder, "study")) and not a.resume:
                raise SystemExit(f"{folder}/study exists: remove it, give another --out, or --resume it")
            tune = write_configs(folder, a.data_dir, a.trials, a.epochs, pruner, int(parallel), a.seed, a.cull_keep_ratio)
            print(f"study {name}, parallel_runs {parallel} ({threads_per_trial(int(parallel))} torch threads per "
                  f"trial): load average {load_average()}", flush=True)
            run_study(tune, folder)
        results.append(study_result(folder, name, int(parallel)))
    print_table(results, a.trials, a.epochs, a.seed)
    print(f"load average at the end: {load_average()}")
    print(json.dumps({"trials": a.trials, "epochs": a.epochs, "seed": a.seed, "cpu": cpu_model(),
                      "cores": os.cpu_count(), "results": results}))


if __name__ == "__main__":
    main()
