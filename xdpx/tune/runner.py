"""Trials as x-train processes: ``parallel_runs`` slots, each asking the study for a trial, writing its
config, training it in a separate process and telling the study how it ended.

A slot's process gets its own GPU (CUDA_VISIBLE_DEVICES, round robin over the visible ones) or, on the
CPU, an equal share of the cores. The process dies with its x-tune (PR_SET_PDEATHSIG on Linux), so a
killed x-tune leaves no orphan training; its trials lose their heartbeat and are retried by the next
x-tune on the study (study.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import deque
from typing import Any

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.tune.locking import storage_lock
from xdpx.tune.plan import TunePlan, trial_config_path, trial_dir, write_train_config
from xdpx.tune.reporter import PRUNED_ATTR, TRIAL_ENV
from xdpx.tune.study import (
    OVER_BUDGET,
    ask_new_trial,
    build_pruner,
    build_sampler,
    counted_trials,
    pruner_spec,
)

ERROR_ATTR = "error"
CONSOLE_FILE = "console.txt"  # a trial's stdout and stderr, in its folder
POLL_SECONDS = 2.0
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        import ctypes  # lazy: runs in the forked child, before exec (Linux only)
        import signal  # lazy: with ctypes, in the child

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except Exception:
        pass


def visible_gpus() -> list[str]:
    """The GPUs this process may use (CUDA_VISIBLE_DEVICES, else every device torch sees)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    try:
        import torch  # lazy: loads torch, only to count GPUs when CUDA_VISIBLE_DEVICES is unset

        return [str(i) for i in range(torch.cuda.device_count())]
    except Exception:
        return []


class StudyRunner:
    """Runs trials of one study until max_trials are done (counting every worker's trials)."""

    def __init__(self, plan: TunePlan, storage: Any, study_name: str, storage_url: str,
                 say: Any = print, on_trial_end: Any = None) -> None:
        self.plan, self.storage, self.study_name, self.storage_url = plan, storage, study_name, storage_url
        self.say, self.on_trial_end = say, on_trial_end
        self.lock = threading.Lock()
        self.gpus = visible_gpus()
        args = plan.args
        self.parallel_runs = args.parallel_runs or max(1, len(self.gpus))
        self.pruner = pruner_spec(args, plan.total_updates)
        self.failures: list[BaseException] = []
        self.exhausted = False  # said once: a finite space has no untried configuration left

    def study(self, sampler: Any = None) -> Any:
        import optuna  # lazy: loads optuna

        sampler = sampler or build_sampler(self.plan.args.tuner, self.plan.args.seed)
        return optuna.load_study(study_name=self.study_name, storage=self.storage, sampler=sampler,
                                 pruner=build_pruner(self.pruner))

    # ---- the slots -------------------------------------------------------------------------------------
    def run(self) -> None:
        threads = [threading.Thread(target=self._slot, args=(slot,), name=f"x-tune slot {slot}", daemon=True)
                   for slot in range(self.parallel_runs)]
        for thread in threads:
            thread.start()
        for thread in threads:
            while thread.is_alive():  # join in steps: Ctrl-C reaches the main thread
                thread.join(timeout=0.5)
        if self.failures:
            raise self.failures[0]

    def _slot(self, slot: int) -> None:
        try:
            while True:
                trial = self._next_trial()
                if trial is None:
                    if self._all_done():
                        return
                    time.sleep(POLL_SECONDS)  # others' trials still run: one may fail and be retried here
                    continue
                self._run_trial(trial, slot)
        except BaseException as error:  # noqa: BLE001 - reported by run() in the main thread
            self.failures.append(error)

    def _next_trial(self) -> Any:
        """A new (or retried) trial, or None when max_trials are taken or the space has no new configuration.

        The trial is reserved under the storage's lock (locking.py), which every worker of the study
        shares: counting the trials against max_trials (running ones included), ``study.ask`` and the
        check that the drawn configuration is new happen for one worker at a time, so workers started
        together neither go over max_trials nor draw the same values."""
        from optuna.storages import fail_stale_trials  # lazy: loads optuna
        from optuna.trial import TrialState  # lazy: loads optuna

        from xdpx.tune.sampling import space_size, taken_configs  # lazy: loads numpy, optuna

        args = self.plan.args
        with self.lock, storage_lock(self.storage_url, f"study:{self.study_name}:trials"):
            study = self.study()
            fail_stale_trials(study)  # trials of killed workers: failed, then enqueued again
            trials = study.get_trials(deepcopy=False)
            if len(counted_trials(trials)) >= args.max_trials:
                return None
            space = self.plan.distributions()
            taken = taken_configs(trials, space, skip=lambda t: bool(t.system_attrs.get(OVER_BUDGET)))
            size = space_size(space)
            retry_waiting = any(t.state == TrialState.WAITING for t in trials)  # runs its original's values
            if size is not None and len(taken) >= size and not retry_waiting:
                if not self.exhausted:
                    self.exhausted = True
                    self.say(f"the search space has {size} configuration(s) and the study tried every one: no "
                             f"new trial (max_trials {args.max_trials} cannot be reached)")
                return None
            # trial n is drawn with seed + n: its number comes from the storage, so no two workers share it
            trial = ask_new_trial(study, args.tuner, args.seed, space, taken)
            trials = study.get_trials(deepcopy=False)
            ahead = [t for t in counted_trials(trials) if t.number < trial.number]
            if len(ahead) >= args.max_trials:  # only where the lock is this process's (a database other
                # than SQLite or PostgreSQL): another worker took the last trial meanwhile
                self.storage.set_trial_system_attr(trial._trial_id, OVER_BUDGET, True)
                study.tell(trial, state=TrialState.FAIL)
                return None
            return trial

    def _all_done(self) -> bool:
        from optuna.trial import TrialState  # lazy: loads optuna

        trials = self.study().get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING))
        return not trials

    # ---- one trial -------------------------------------------------------------------------------------
    def _run_trial(self, trial: Any, slot: int) -> None:
        from optuna.storages._heartbeat import get_heartbeat_thread  # lazy: loads optuna
        from optuna.trial import TrialState  # lazy: loads optuna

        plan, number = self.plan, trial.number
        for key in (PRUNED_ATTR, ERROR_ATTR, "best_score", "best_step"):  # a retry copies its original's
            trial.set_user_attr(key, None)
        values = plan.trial_values(trial.params)
        folder = trial_dir(plan.args.save_dir, number)
        trial.set_user_attr("save_dir", folder)
        try:
            trial_args = plan.trial_args(values, folder)
        except ConfigError as e:  # a combination the options refuse: this trial fails, the study goes on
            return self._finish(trial, TrialState.FAIL, error=f"invalid sampled config: {e}")
        config_path = trial_config_path(plan.args.save_dir, number)
        io.makedirs(io.dirname(config_path))
        write_train_config(trial_args, config_path, f"x-tune trial {number} of study {self.study_name!r}")
        self.say(f"trial {number} starts: {', '.join(f'{k}={v!r}' for k, v in values.items())} -> {folder}")
        with get_heartbeat_thread(trial._trial_id, self.storage):
            code, tail = self._train(trial, config_path, folder, slot)
        attrs = self.storage.get_trial(trial._trial_id).user_attrs
        if code != 0:
            lines = [line for line in tail if "error" in line.lower()] or tail
            message = lines[-1].strip() if lines else f"x-train exited with code {code}"
            return self._finish(trial, TrialState.FAIL, error=message)
        if attrs.get(PRUNED_ATTR) is not None:
            return self._finish(trial, TrialState.PRUNED)
        if attrs.get("best_score") is None:
            return self._finish(trial, TrialState.FAIL, error="the trial made no evaluation of its major metric")
        return self._finish(trial, TrialState.COMPLETE, value=float(attrs["best_score"]))

    def _train(self, trial: Any, config_path: str, folder: str, slot: int) -> tuple[int, list[str]]:
        """Run x-train for the trial; (exit code, last lines of its output). Output goes to console.txt."""
        spec = {"storage": self.storage_url, "study": self.study_name, "trial_id": trial._trial_id,
                "pruner": self.pruner, "step_samples": self.plan.update_size,
                "eval_deviation": self.eval_deviation(), "assess_start_step": self.plan.args.assess_start_step,
                "assess_interval": self.plan.args.assess_interval}
        env = {**os.environ, TRIAL_ENV: json.dumps(spec)}
        if self.gpus:
            env["CUDA_VISIBLE_DEVICES"] = self.gpus[slot % len(self.gpus)]
        elif "OMP_NUM_THREADS" not in os.environ:  # share the cores instead of oversubscribing them
            env["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // self.parallel_runs))
        command = [sys.executable, "-m", "xdpx", "x-train", config_path]  # x-train as a user runs it
        tail: deque[str] = deque(maxlen=40)
        lines: list[str] = []
        process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   errors="replace", preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip("\n"))
            lines.append(line)
        code = process.wait()
        io.makedirs(folder)  # also when x-train refused the config: console.txt says why
        with io.open(io.join(folder, CONSOLE_FILE), "w") as f:
            f.write("".join(lines))
        return code, list(tail)

    def eval_deviation(self) -> int:
        a = self.plan.args
        return a.eval_deviation if a.eval_deviation is not None else max(1, a.assess_interval * self.plan.update_size // 2)

    def _finish(self, trial: Any, state: Any, value: float | None = None, error: str | None = None) -> None:
        if error is not None:
            trial.set_user_attr(ERROR_ATTR, error)
        self.study().tell(trial.number, value, state=state)  # value: None unless complete
        shown = state.name.lower() + (f", best {value:.4g}" if value is not None else "") + (f": {error}" if error else "")
        self.say(f"trial {trial.number} {shown}")
        if self.on_trial_end is not None:
            with self.lock:
                self.on_trial_end(trial.number)
