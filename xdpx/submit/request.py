"""What a submission asks Slurm for (:class:`JobRequest`), read from x-submit's flags or, on a terminal
without flags, from a few questions (as pai.sh asked them)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from xdpx.config.errors import ConfigError

USAGE = ("x-submit [--nodes N] [--gpus-per-node [TYPE:]G] [--procs-per-node P] [--cpus C] [--mem M] [--time T] "
         "[--partition P] [--constraint C] [--account A] [--qos Q] [--reservation R] [--sbatch=--FLAG[=VALUE] ...] "
         "[--signal-grace S] [--no-requeue] [--max-parallel N] [--workers N] [--job-name NAME] [--log-dir DIR] "
         "[--dry] x-train config.hjson [x-eval eval.hjson ...]  |  x-submit status|cancel|logs JOB_ID|RUN_DIR")

# The flags that size the job: when none is given on a terminal, x-submit asks for them.
RESOURCE_FLAGS = ("nodes", "gpus_per_node", "procs_per_node", "cpus", "mem", "time", "partition")

# Every value that reaches the job script matches Slurm's syntax for its flag (sbatch(1)) before anything
# is written or submitted (--dry too): a line break or `;` in a flag would otherwise be a command of the
# script. ASCII only: str.isdigit() and \d also accept other scripts' digits.
_TIME = re.compile(r"[0-9]+(?::[0-9]+){0,2}|[0-9]+-[0-9]+(?::[0-9]+){0,2}|infinite|unlimited", re.IGNORECASE)
_TIME_FORM = "MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM or D-HH:MM:SS (e.g. 30, 2:00:00, 1-00:00:00), or UNLIMITED"
_SLURM_NAME = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"  # partitions, as slurm.conf names them
_PARTITION = re.compile(rf"{_SLURM_NAME}(?:,{_SLURM_NAME})*")  # also reservations
_GPUS = re.compile(rf"(?:({_SLURM_NAME}):)?([0-9]{{1,4}})")  # --gpus-per-node 4 or a100:4
_CONSTRAINT = re.compile(r"[A-Za-z0-9_.&|,:*()\[\]-]+")  # node features: a100&ib, [rack1|rack2], gpu*2
# a pass-through sbatch flag: --name or --name=value, the value without control characters or backslashes
_SBATCH_FLAG = re.compile(r"--([a-z][a-z0-9-]*)(?:=([^\x00-\x1f\x7f\\]+))?")
# the flags x-submit writes itself: given through --sbatch they would contradict its own (its flag says what to use)
MANAGED_SBATCH = {
    "job-name": "--job-name", "nodes": "--nodes", "ntasks-per-node": "--procs-per-node", "ntasks": "--nodes",
    "cpus-per-task": "--cpus", "gpus-per-node": "--gpus-per-node", "gres": "--gpus-per-node", "mem": "--mem",
    "time": "--time", "partition": "--partition", "output": "--log-dir", "error": "--log-dir",
    "open-mode": "--log-dir", "chdir": "the folder x-submit runs from", "export": "the submitting shell's environment",
    "array": "a config with loops (one array task per run) and --max-parallel", "signal": "--signal-grace",
    "requeue": "--no-requeue", "no-requeue": "--no-requeue", "account": "--account", "qos": "--qos",
    "reservation": "--reservation", "constraint": "--constraint", "wrap": "the chain of commands",
    "parsable": "nothing (x-submit reads the job id itself)", "test-only": "--dry",
}
_JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.+-]{0,199}")  # also the name of the script and log files
_LOG_DIR = re.compile(r"[\w./ +@:,=~-]+")  # no shell syntax, no % (a pattern of sbatch's --output)
# a line break, a tab, any control character, or a backslash (sbatch reads it as an escape in #SBATCH lines)
_UNSAFE_IN_SCRIPT = re.compile(r"[\x00-\x1f\x7f\\]")


@dataclass
class JobRequest:
    """Resources of one job: ``nodes`` x ``procs_per_node`` training processes (one per GPU on GPUs)."""

    nodes: int = 1
    gpus_per_node: int = 0
    procs_per_node: int | None = None  # None: one per GPU, or 1 without GPUs
    cpus: int | None = None  # CPUs per node; None: one per process
    mem: str | None = None  # per node, Slurm syntax; a bare number means gigabytes (as pai.sh's -m)
    time: str | None = None  # Slurm time limit, e.g. 2:00:00 or 1-00:00:00
    partition: str | None = None
    job_name: str | None = None
    log_dir: str = "slurm_jobs"
    dry: bool = False
    gpu_type: str | None = None  # --gpus-per-node a100:4 -> a100
    constraint: str | None = None
    account: str | None = None
    qos: str | None = None
    reservation: str | None = None
    sbatch: list[str] = field(default_factory=list)  # pass-through flags, each --name[=value], checked
    signal_grace: int = 120  # seconds before the time limit that Slurm sends SIGUSR1 (0: no signal)
    requeue: bool = True  # a step that stops on the signal (exit 3) requeues the job
    max_parallel: int | None = None  # array tasks running at once (%N); None: as many as Slurm starts
    workers: int = 1  # x-tune: worker jobs sharing one study storage

    @property
    def processes_per_node(self) -> int:
        if self.procs_per_node is not None:
            return self.procs_per_node
        return self.gpus_per_node or 1

    @property
    def slurm_gpus(self) -> str:
        """The value of ``#SBATCH --gpus-per-node``: ``4`` or ``a100:4``."""
        return f"{self.gpu_type}:{self.gpus_per_node}" if self.gpu_type else str(self.gpus_per_node)

    @property
    def cpus_per_node(self) -> int:
        return self.cpus if self.cpus is not None else self.processes_per_node

    @property
    def slurm_mem(self) -> str | None:
        if self.mem is None:
            return None
        return f"{self.mem}G" if self.mem.isdigit() else self.mem


def _positive(name: str, minimum: int = 1) -> Callable[[str], int]:
    def convert(text: str) -> int:
        if not re.fullmatch(r"[0-9]{1,9}", text) or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be a whole number >= {minimum}, got {text!r}")
        return int(text)

    return convert


def _memory(text: str) -> str:
    if not re.fullmatch(r"[0-9]{1,12}[KMGT]?", text, flags=re.IGNORECASE):
        raise argparse.ArgumentTypeError(f"--mem takes e.g. 16 (gigabytes), 16G or 500M, got {text!r}")
    return text.upper()


def _matching(flag: str, pattern: re.Pattern[str], form: str) -> Callable[[str], str]:
    """An argparse ``type`` that accepts only values of Slurm's syntax for ``flag``: nothing else reaches the
    job script (a line break or ``;`` there would be a shell command)."""

    def check(text: str) -> str:
        if not pattern.fullmatch(text):
            raise argparse.ArgumentTypeError(f"{flag} takes {form}, got {text!r}")
        return text

    return check


_time = _matching("--time", _TIME, f"Slurm's time format {_TIME_FORM}")
_constraint = _matching("--constraint", _CONSTRAINT,
                        "node features of the cluster joined by & | , with [ ] ( ) * (e.g. a100&ib)")
_account = _matching("--account", re.compile(_SLURM_NAME), "a Slurm account name (letters, digits, _ . -)")
_qos = _matching("--qos", re.compile(_SLURM_NAME), "a Slurm QOS name (letters, digits, _ . -)")
_reservation = _matching("--reservation", _PARTITION,
                         "a Slurm reservation name (letters, digits, _ . -; several comma-separated)")


def _gpus(text: str) -> tuple[str | None, int]:
    match = _GPUS.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(f"--gpus-per-node takes a whole number >= 0 or TYPE:N (e.g. 4 or a100:4, "
                                         f"the GPU type as the cluster's gres.conf names it), got {text!r}")
    return match.group(1), int(match.group(2))


def _sbatch_flag(text: str) -> str:
    """A pass-through sbatch flag (``--begin=now+1hour``, ``--mail-type=END``), or the reason it is refused."""
    match = _SBATCH_FLAG.fullmatch(text)
    if not match:
        raise argparse.ArgumentTypeError(
            f"--sbatch takes one long sbatch flag as --sbatch=--NAME or --sbatch=--NAME=VALUE (e.g. "
            f"--sbatch=--mail-type=END; no line break, control character or backslash), got {text!r}")
    if match.group(1) in MANAGED_SBATCH:
        raise argparse.ArgumentTypeError(f"--sbatch={text}: x-submit sets --{match.group(1)} itself: use "
                                         f"{MANAGED_SBATCH[match.group(1)]} instead")
    return text
_partition = _matching("--partition", _PARTITION,
                       "a Slurm partition name (letters, digits, _ . -; several comma-separated)")
_job_name = _matching("--job-name", _JOB_NAME,
                      "letters, digits and _ . + - (at most 200, not starting with . + -)")


def script_safe(what: str, text: str) -> str:
    """``text`` (a folder, a path of the chain), or a ConfigError when the job script cannot carry it."""
    if not text or _UNSAFE_IN_SCRIPT.search(text):
        raise ConfigError(f"x-submit: {what} {text!r} holds a line break, a control character or a backslash, "
                          "which a job script cannot carry safely: rename it")
    return text


_log_dir = _matching("--log-dir", _LOG_DIR,
                     "a folder of letters, digits, spaces and _ . / + @ : , = ~ -")


class _Parser(argparse.ArgumentParser):
    """Bad flags are one line (a ConfigError: exit 2), not argparse's usage block and exit."""

    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="x-submit", usage=USAGE, allow_abbrev=False, add_help=True,
                     description="Check a chain of x-* commands like --dry, then run it as a Slurm job "
                                 "(srun + torchrun). See docs/submit.md.")
    parser.add_argument("--nodes", type=_positive("--nodes"), help="machines (default 1)")
    parser.add_argument("--gpus-per-node", type=_gpus,
                        help="GPUs per node, optionally of a type: 4 or a100:4 (default 0)")
    parser.add_argument("--procs-per-node", type=_positive("--procs-per-node"),
                        help="training processes per node (default: one per GPU, 1 without GPUs)")
    parser.add_argument("--cpus", type=_positive("--cpus"), help="CPUs per node (default: one per process)")
    parser.add_argument("--mem", type=_memory, help="memory per node: 16 (GB), 16G, 500M (default: Slurm's)")
    parser.add_argument("--time", type=_time, help="time limit, Slurm syntax: 30, 2:00:00, 1-00:00:00 (default: the partition's)")
    parser.add_argument("--partition", type=_partition, help="Slurm partition (default: the cluster's default)")
    parser.add_argument("--constraint", type=_constraint, help="node features the job needs (e.g. a100&ib)")
    parser.add_argument("--account", type=_account, help="Slurm account charged for the job")
    parser.add_argument("--qos", type=_qos, help="Slurm quality of service")
    parser.add_argument("--reservation", type=_reservation, help="Slurm reservation to run in")
    parser.add_argument("--sbatch", type=_sbatch_flag, action="append",
                        help="any other sbatch flag, passed through: --sbatch=--mail-type=END (repeatable)")
    parser.add_argument("--signal-grace", type=_positive("--signal-grace", 0),
                        help="seconds before the time limit at which Slurm sends SIGUSR1: x-train saves its state "
                             "and the job is requeued (default 120; 0: no signal)")
    parser.add_argument("--no-requeue", dest="requeue", action="store_false", default=None,
                        help="do not requeue a job whose x-train stopped on the signal (it ends FAILED)")
    parser.add_argument("--max-parallel", type=_positive("--max-parallel"),
                        help="a config with loops runs as a job array: at most N of its runs at once")
    parser.add_argument("--workers", type=_positive("--workers"),
                        help="x-tune: N worker jobs sharing the study's storage (PostgreSQL; default 1)")
    parser.add_argument("--job-name", type=_job_name, help="job name (default: the first command and config, e.g. x-train.config)")
    parser.add_argument("--log-dir", type=_log_dir, help="folder of the job scripts and logs (default slurm_jobs)")
    parser.add_argument("--dry", action="store_true", help="check the configs and print the job script; submit nothing")
    return parser


def parse_request(argv: list[str]) -> tuple[JobRequest, list[str], set[str]]:
    """Split x-submit's flags (anywhere on the line, as pai.sh allowed) from the chain of commands.

    Returns the request, the chain's tokens in order and the names of the flags given.
    """
    parser = _parser()
    known, chain = parser.parse_known_args(argv)  # -h prints the help and exits 0
    unknown = [t for t in chain if t.startswith("-")]
    if unknown:
        raise ConfigError(f"x-submit: unknown flag {unknown[0]!r}; usage: {USAGE}")
    if not chain:
        raise ConfigError(f"x-submit: give the commands to run, e.g. x-submit --nodes 2 x-train config.hjson; "
                          f"usage: {USAGE}")
    for token in chain:
        script_safe("argument", token)
    given = {name for name, value in vars(known).items() if value not in (None, False)}
    values = {name: value for name, value in vars(known).items() if value is not None}
    if "gpus_per_node" in values:
        values["gpu_type"], values["gpus_per_node"] = values["gpus_per_node"]
        if values["gpu_type"] and not values["gpus_per_node"]:
            raise ConfigError(f"x-submit: --gpus-per-node {values['gpu_type']}:0 asks for no GPU: give a count >= 1")
    request = JobRequest(**values)
    return request, chain, given


def ask_missing(request: JobRequest, ask: Callable[[str], str] = input) -> JobRequest:
    """Ask for the size of the job on a terminal (Enter keeps the default shown in brackets)."""
    questions = [
        ("nodes", "nodes", str(request.nodes), _positive("nodes")),
        ("gpus_per_node", "GPUs per node", str(request.gpus_per_node), _positive("GPUs per node", 0)),
    ]
    for name, label, default, convert in questions:
        setattr(request, name, _ask_until_valid(ask, label, default, convert))
    more = [
        ("procs_per_node", "processes per node", str(request.processes_per_node), _positive("processes per node")),
        ("cpus", "CPUs per node", str(request.cpus_per_node), _positive("CPUs per node")),
        ("mem", "memory per node (GB, or 500M; empty: Slurm's default)", request.mem or "", _optional(_memory)),
        ("time", "time limit (e.g. 2:00:00; empty: the partition's)", request.time or "", _optional(_time)),
        ("partition", "partition (empty: the default one)", request.partition or "", _optional(_partition)),
    ]
    for name, label, default, convert in more:
        setattr(request, name, _ask_until_valid(ask, label, default, convert))
    return request


def _optional(convert: Callable[[str], object]) -> Callable[[str], object]:
    return lambda text: convert(text) if text else None


def _ask_until_valid(ask: Callable[[str], str], label: str, default: str, convert: Callable[[str], object]) -> object:
    while True:
        answer = ask(f"{label} [{default}]: ").strip() or default
        try:
            return convert(answer)
        except argparse.ArgumentTypeError as e:
            print(f"  {e}", file=sys.stderr)
