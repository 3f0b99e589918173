"""The x-tune command: check the three files, open (or create) the study, run trials, write the outputs.

``x-tune tune.hjson --dry`` prints the space, the values trials 0-2 will run and the plan (which step each
assessment happens at), and writes nothing.
"""

from __future__ import annotations

import json
import time
import warnings
from typing import Any

from xdpx import io
from xdpx.command import Command, commands
from xdpx.config.errors import ConfigError
from xdpx.config.loader import find_config_file
from xdpx.config.options import Args
from xdpx.config.writers import masked_notice, masked_options
from xdpx.errors import UserError
from xdpx.io import study_folder
from xdpx.io.credentials import hand_down, redact
from xdpx.io.ownership import Output, is_run_dir
from xdpx.tune.plan import CONFIGS_DIR, TRIALS_PREFIX, build_plan, config_dir_of
from xdpx.tune.study import (
    STUDY_DB,
    ask_new_trial,
    hyperband_brackets,
    hyperband_rungs,
    open_storage,
    pruner_spec,
    redact_url,
    reduction_factor,
    storage_url,
)

SPACE_KEY = "xdpx_space"  # study user attribute: the space the study was created with
DRY_SAMPLES = 3


@commands.register("x-tune")
class TuneCommand(Command):
    """Hyperparameter search over x-train on Optuna: HyperBand pruning, parallel trials, resumable (docs/tune.md)."""

    name = "x-tune"
    group = "tune"
    output_key = "save_dir"

    def options(self) -> list[Any]:
        from xdpx.tune.options import TUNE_OPTIONS  # lazy: keeps --help light

        return list(TUNE_OPTIONS)

    def outputs(self, args: Args) -> list[Output]:
        # the study folder: results.tsv, overview.png, best_config.hjson, configs/, trial_<n>/, study.db
        return [Output("save_dir", args.save_dir, "folder", legacy=is_study_dir)]

    def inputs(self, args: Args) -> list[tuple[str, str]]:
        found = [("config file", args.source("save_dir"))] if io.isfile(args.source("save_dir")) else []
        for key in ("space_config", "base_config"):
            try:
                found.append((key, find_config_file(args.get(key), config_dir_of(args, key))))
            except ConfigError:
                continue  # the plan names the missing file, as a config error
        return found

    def run(self, args: Args, dry: bool = False) -> None:

        problem = study_folder.study_problem(args.save_dir, study_identity(args))
        if problem is not None:  # another study's folder: its outputs and trial folders would be rewritten
            raise ConfigError(f"{study_refusal(args)}: {problem}")
        plan = build_plan(args)
        if dry:
            print(describe_plan(plan))
            return
        run_study(plan)


def study_identity(args: Args) -> dict[str, str]:
    """Which study writes the folder: its storage (the password hidden) and study_name. The default storage
    is named by its place, not its absolute path, so a study folder can move."""
    storage = redact_url(args.storage) if args.storage else f"{STUDY_DB} in save_dir"
    return {"storage": storage, "study": args.study_name}


def study_refusal(args: Args) -> str:
    return f"{args.source('save_dir')}: key 'save_dir': x-tune refuses to write {redact(args.save_dir)!r}"


def is_study_dir(path: str) -> bool:
    """A study folder x-tune wrote before XDPX kept records: its SQLite storage (or that storage's lock), its
    trial configs, or a trial's run directory."""
    names = io.listdir(path)
    if STUDY_DB in names or f"{STUDY_DB}.lock" in names or study_folder.STUDY_FILE in names:
        return True
    configs = io.join(path, CONFIGS_DIR)
    if CONFIGS_DIR in names and io.isdir(configs) and any(n.startswith(TRIALS_PREFIX) for n in io.listdir(configs)):
        return True
    return any(n.startswith(TRIALS_PREFIX) and is_run_dir(io.join(path, n)) for n in names)


def space_signature(plan: Any) -> str:
    return json.dumps({p.name: [p.type, p.values, p.log, p.step] for p in plan.params}, sort_keys=True)


def describe_plan(plan: Any) -> str:
    """The space, the values of trials 0-2 and the assessment plan (what ``--dry`` prints)."""
    import optuna  # lazy: loads optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    a = plan.args
    lines = ["# search space:"]
    lines += [f"#   {p.name}: {p.describe()}" for p in plan.params]
    lines += dry_trials(plan)
    spec = pruner_spec(a, plan.total_updates)
    rungs = hyperband_rungs(spec)
    lines.append(f"# plan: {a.max_trials} trials, {a.parallel_runs or 'one per GPU (or 1)'} at once; a trial runs "
                 f"{plan.total_updates} updates of {plan.update_size} samples, evaluated every "
                 f"{a.assess_interval} updates; pruner {a.pruner}")
    if a.pruner in ("hyperband", "successive_halving") and rungs:

        factor = reduction_factor(a.cull_keep_ratio)
        lines.append(f"#   assessments at updates {rungs}: at each, a trial goes on when it is in the best 1/{factor} "
                     f"of the trials assessed there so far (reduction factor {factor})")
        if a.pruner == "hyperband":
            brackets = hyperband_brackets(spec)
            lines.append(f"#   hyperband: {len(brackets)} bracket(s), each trial drawn into one (each bracket ranks "
                         "only its own trials):")
            for b, (share, at) in enumerate(brackets):
                when = f"assessed at updates {at}" if at else "never assessed: they all run to the end"
                lines.append(f"#     bracket {b}: about {share:.0%} of the trials (~{share * a.max_trials:.0f} of "
                             f"{a.max_trials}), {when}")
        else:
            for k, step in enumerate(rungs):
                lines.append(f"#   about {max(1, a.max_trials // factor ** (k + 1))} of {a.max_trials} trials go "
                             f"past update {step}")
    elif a.pruner == "percentile" and rungs:
        lines.append(f"#   assessments at updates {rungs[:8]}{' ...' if len(rungs) > 8 else ''}: a trial below the "
                     f"best {a.cull_keep_ratio:.0%} at that step stops")
    lines.append(f"#   no trial is pruned before {a.min_ref} trial(s) ran to the end (min_ref)")

    lines.append(f"# storage: {storage_url(a.storage, a.save_dir)}, study {a.study_name!r}")
    return redact("\n".join(lines))


def dry_trials(plan: Any) -> list[str]:
    """The values trials 0 .. DRY_SAMPLES-1 of a new study will run, drawn the way the runner draws them
    (ask_new_trial: seed + trial number, no repeated configuration) on an empty in-memory study, each checked
    like any x-train config. No result of an earlier trial changes these draws: the random tuner ignores
    results and TPE draws its first 10 trials at random (Optuna's n_startup_trials). Only a trial retried
    before trial 2 is asked (its process died) would take one of these numbers with its original's values."""
    import optuna  # lazy: loads optuna

    from xdpx.tune.sampling import SpaceExhausted, taken_configs  # lazy: loads numpy, optuna

    a = plan.args
    space = plan.distributions()
    study = optuna.create_study(direction=plan.direction)
    lines = [f"# the values of trials 0-{DRY_SAMPLES - 1} of a new study in {a.save_dir} (tuner {a.tuner}, seed "
             f"{a.seed}: trial n is drawn with seed + n):"]
    for n in range(DRY_SAMPLES):
        try:
            trial = ask_new_trial(study, a.tuner, a.seed, space, taken_configs(study.get_trials(deepcopy=False), space))
        except SpaceExhausted:
            lines.append(f"#   (the search space has only {n} configuration(s))")
            break
        values = plan.trial_values(trial.params)
        plan.trial_args(values, f"{a.save_dir}/trial_{n}")  # each one checked like any x-train config
        lines.append(f"#   trial {n}: " + ", ".join(f"{k}={v!r}" for k, v in values.items()))
    return lines


def quiet_optuna() -> None:
    """Optuna warns that heartbeats and retries are experimental and meant for Study.optimize: they are
    what x-tune relies on, by design, so the warnings would only alarm users."""
    import optuna  # lazy: loads optuna

    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")


def open_study(plan: Any, url: str) -> Any:
    """The study's storage, creating the study (once) or checking that it is this one."""

    for attempt in range(5):  # workers started together race to create the tables and the study
        try:
            return _open_study(plan, url)
        except (ConfigError, UserError):
            raise
        except Exception:
            if attempt == 4:
                raise
            time.sleep(0.5 + attempt)
    raise AssertionError("unreachable")


def _open_study(plan: Any, url: str) -> Any:
    import optuna  # lazy: loads optuna

    a = plan.args
    storage = open_storage(url, a.heartbeat_interval, a.max_retries)
    signature = space_signature(plan)
    try:
        existing = optuna.load_study(study_name=a.study_name, storage=storage)
    except KeyError:
        existing = None
    if existing is not None:
        problems = []
        if existing.user_attrs.get(SPACE_KEY) not in (None, signature):
            problems.append(f"{a.source('space_config')}: key 'space_config': the study {a.study_name!r} in this "
                            "storage was created with another search space: use a new save_dir or study_name, "
                            "or restore the space")
        if existing.direction.name.lower() != plan.direction:
            problems.append(f"{a.source('base_config')}: the study {a.study_name!r} {existing.direction.name.lower()}s"
                            f" its metric, the base config's ascending_metric says {plan.direction}")
        if problems:
            raise ConfigError(problems)
        return storage
    try:
        study = optuna.create_study(study_name=a.study_name, storage=storage, direction=plan.direction)
        study.set_user_attr(SPACE_KEY, signature)
    except optuna.exceptions.DuplicatedStudyError:
        pass  # another worker created it at the same moment
    return storage


def run_study(plan: Any) -> None:
    from xdpx.tune.results import remove_checkpoints_below, write_outputs  # lazy: keeps --help light
    from xdpx.tune.runner import StudyRunner  # lazy: keeps --help light

    a = plan.args
    url = storage_url(a.storage, a.save_dir)
    quiet_optuna()
    if not io.is_remote(a.save_dir):
        io.makedirs(a.save_dir)
    # workers of this study share the folder; another study is refused before it writes a file there
    study_folder.claim_study(a.save_dir, study_identity(a), study_refusal(a))
    storage = open_study(plan, url)
    say = lambda message: print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} | x-tune: {redact(message)}", flush=True)  # noqa: E731
    # the trial configs and best_config.hjson hold the base config's credentials masked: the trials, which
    # x-tune starts, get them in their environment (xdpx.io.credentials.hand_down)
    masked = masked_options(plan.base_args)
    if masked:
        hand_down(plan.base_args.non_defaults())
        say(masked_notice(masked, "the trial configs and best_config.hjson"))
    runner: StudyRunner | None = None

    def on_trial_end(number: int) -> None:
        assert runner is not None
        study = runner.study()
        trial = study.get_trials(deepcopy=False)[number]
        for path in remove_checkpoints_below(plan, trial):
            say(f"save_above_score: removed {path}")
        try:
            write_outputs(plan, study)
        except Exception as error:  # the outputs are redrawn after the next trial; the study goes on
            say(f"writing results/overview failed ({type(error).__name__}: {error})")

    runner = StudyRunner(plan, storage, a.study_name, url, say=say, on_trial_end=on_trial_end)
    say(f"study {a.study_name!r} in {url}: {a.max_trials} trials, {runner.parallel_runs} at once"
        + (f" on GPUs {', '.join(runner.gpus)}" if runner.gpus else ""))
    runner.run()
    best = write_outputs(plan, runner.study())
    if best is None:
        raise UserError(f"no trial of the study completed: see {io.join(a.save_dir, 'results.tsv')} for the errors")
    say(f"best {plan.base_args.major_metric} {best.value:.6g}: trial {best.number} "
        f"({', '.join(f'{k}={v!r}' for k, v in plan.trial_values(best.params).items())}); "
        f"results.tsv, overview.png and best_config.hjson in {a.save_dir}")
