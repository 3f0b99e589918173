"""The sbatch script of a submission: one srun step per config of the chain, in order.

x-train, x-eval and x-pred steps run on every node: srun starts one torchrun per node, and torchrun
starts ``procs_per_node`` processes there, meeting the other nodes through a c10d rendezvous hosted on
the first node of the allocation; a job of one process in all runs them as that process, without
torchrun. Other commands (x-prepro, x-viz, exports) run once, as one process on the first node, as they
would in a local chain. The chain stops at the first failing step with
a message saying how to resume.
"""

from __future__ import annotations

import re
import shlex
import time

from xdpx.command import get_command
from xdpx.errors import EXIT_REQUEUE
from xdpx.io.credentials import redact
from xdpx.submit.request import JobRequest


def runs_on_every_node(name: str) -> bool:
    """Commands that take part on every process (``every_rank``: x-train, and x-eval / x-pred with their
    sharded evaluation) run as a torchrun job on every node; the others as one process."""
    return bool(get_command(name).every_rank)


def job_steps(chain: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """``[('x-train', ['a', 'b']), ('x-eval', ['c'])]`` -> one (command, config) step per config file."""
    return [(name, path) for name, paths in chain for path in paths]


def array_size(runs: list[int], request: JobRequest) -> int:
    """Tasks of the job array (0: a plain job): the runs of a looped config (every looped step has as many), or
    the x-tune workers. ``runs``: the number of runs each step's config describes."""
    if request.workers > 1:
        return request.workers
    return max(runs, default=1) if max(runs, default=1) > 1 else 0


def render_script(request: JobRequest, steps: list[tuple[str, str]], *, python: str, workdir: str,
                  log_path: str, job_name: str, command_line: list[str], runs: list[int] | None = None) -> str:
    """The text of the sbatch script; ``log_path`` may hold Slurm's ``%j`` (the job id) or ``%A_%a`` (array).

    ``runs``: how many runs each step's config describes; a step with several runs becomes one run per task
    of a job array (``python -m xdpx.submit.chain --run-index $SLURM_ARRAY_TASK_ID``)."""
    q = shlex.quote  # every value, though request.py has checked it against Slurm's syntax already
    runs = runs or [1] * len(steps)
    tasks = array_size(runs, request)
    shown = _one_line(redact(shlex.join(command_line)))  # for the comments and messages: credentials masked
    log_dir, _ = log_path.rsplit("/", 1)
    directives = [
        f"--job-name={q(job_name)}",
        f"--nodes={request.nodes}",
        "--ntasks-per-node=1",  # one torchrun per node; it starts the processes of that node
        f"--cpus-per-task={request.cpus_per_node}",
        *([f"--gpus-per-node={q(request.slurm_gpus)}"] if request.gpus_per_node else []),
        *([f"--mem={q(request.slurm_mem)}"] if request.slurm_mem else []),
        *([f"--time={q(request.time)}"] if request.time else []),
        *([f"--partition={q(request.partition)}"] if request.partition else []),
        *([f"--constraint={q(request.constraint)}"] if request.constraint else []),
        *([f"--account={q(request.account)}"] if request.account else []),
        *([f"--qos={q(request.qos)}"] if request.qos else []),
        *([f"--reservation={q(request.reservation)}"] if request.reservation else []),
        *([f"--array=0-{tasks - 1}" + (f"%{request.max_parallel}" if request.max_parallel else "")] if tasks else []),
        # Slurm sends SIGUSR1 to every process of the running step `grace` seconds before the time limit
        # (up to 60 s earlier: its event resolution); x-train saves its state and exits 3 (docs/submit.md)
        *([f"--signal=USR1@{request.signal_grace}"] if request.signal_grace else []),
        "--requeue" if request.requeue else "--no-requeue",
        # sbatch reads #SBATCH values with the shell's quotes (no backslash: request.script_safe refuses it)
        f"--output={q(log_path)}",
        "--open-mode=append",  # a requeued job writes on after its earlier runs, into the same log
        f"--chdir={q(workdir)}",
        "--export=ALL",  # the job sees the submitting shell's environment (PATH, PYTHONPATH, credentials' env)
        *(_pass_through(flag) for flag in request.sbatch),
    ]
    requeue_note = ("requeueing the job: it continues from that state" if request.requeue else
                    "the job was submitted with --no-requeue: submit it again to continue from that state")
    lines = [
        "#!/bin/bash",
        f"# Written by x-submit on {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())} for:",
        f"#   {shown}",
        "# Submit it again unchanged with: sbatch THIS_FILE (docs/submit.md)",
        *(f"#SBATCH {d}" for d in directives),
        "",
        "set -uo pipefail",
        "",
        "# torchrun's c10d rendezvous is hosted by the first node of the allocation.",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)',
        "MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))",
        "# the steps this job finished, so that a requeued job (the script starts again) skips them",
        f"DONE_FILE={q(log_dir)}/{q(job_name)}.$SLURM_JOB_ID.done",
        'echo "x-submit: job $SLURM_JOB_ID' + (' (array task $SLURM_ARRAY_TASK_ID of job $SLURM_ARRAY_JOB_ID)'
                                               if tasks else '') +
        ' on $SLURM_JOB_NUM_NODES node(s) ($SLURM_JOB_NODELIST), rendezvous on $MASTER_ADDR, '
        'start ${SLURM_RESTART_COUNT:-0}"',
        "",
        "failed() {  # step number, step, exit status",
        '    echo "x-submit: step $1 ($2) failed with exit status $3 in job $SLURM_JOB_ID; the steps after it '
        'did not run." >&2',
        '    echo "x-submit: x-train keeps its last saved state in save_dir: to continue from it, set resume: '
        'true in that config and submit again: ' + _double_quoted(shown) + '" >&2',
        '    exit "$3"',
        "}",
        "",
        "finished() {  # step number, step, exit status: 0 done, 3 stopped on a signal after saving its state",
        '    case "$3" in',
        '        0) echo "$1" >> "$DONE_FILE" ;;',
        f'        {EXIT_REQUEUE})',
        '            echo "x-submit: step $1 ($2) stopped on a signal after saving its state (exit '
        f'{EXIT_REQUEUE}); {requeue_note}" >&2',
        *(['            scontrol requeue "$SLURM_JOB_ID" && exit 0',
           '            echo "x-submit: scontrol requeue $SLURM_JOB_ID failed: submit the job again" >&2']
          if request.requeue else []),
        f'            exit {EXIT_REQUEUE} ;;',
        '        *) failed "$1" "$2" "$3" ;;',
        "    esac",
        "}",
        "",
    ]
    for number, ((name, path), count) in enumerate(zip(steps, runs), start=1):
        label = _one_line(redact(f"{name} {path}"))
        chain = "-m xdpx.submit.chain " + ('--run-index "$SLURM_ARRAY_TASK_ID" ' if count > 1 else "")
        lines += [f"if grep -qx {number} \"$DONE_FILE\" 2>/dev/null; then",
                  f"    echo {q(f'x-submit: step {number}/{len(steps)} ({label}) finished before the requeue: skipped')}",
                  "else",
                  f"    echo {q(f'x-submit: step {number}/{len(steps)}: {label}')}"]
        if runs_on_every_node(name) and request.nodes * request.processes_per_node > 1:
            # xdpx.submit.launch: torchrun that lets the signal reach the ranks and passes their exit 3 on
            lines.append(
                f"    srun --nodes={request.nodes} --ntasks-per-node=1 --cpus-per-task={request.cpus_per_node} "
                f"--kill-on-bad-exit=1 \\\n"
                f"        {q(python)} -m xdpx.submit.launch --nnodes={request.nodes} "
                f"--nproc_per_node={request.processes_per_node} \\\n"
                f"        --rdzv_backend=c10d --rdzv_id=\"$SLURM_JOB_ID.{number}\" "
                f"--rdzv_endpoint=\"$MASTER_ADDR:$((MASTER_PORT + {number}))\" \\\n"
                f"        {chain}{q(name)} {q(path)}"
            )
        else:  # one process (a one-process x-train needs no torchrun: its exit 3 reaches the script as it is)
            lines.append(f"    srun --nodes=1 --ntasks=1 --cpus-per-task={request.cpus_per_node} "
                         f"{q(python)} {chain}{q(name)} {q(path)}")
        lines += [f"    finished {number} {q(label)} $?", "fi"]
    lines += ['rm -f "$DONE_FILE"', f"echo {q(f'x-submit: all {len(steps)} step(s) finished')}"]
    return "\n".join(lines) + "\n"


def _pass_through(flag: str) -> str:
    """``--begin=now+1hour`` as an #SBATCH value, quoted (request.py checked its form)."""
    name, sep, value = flag.partition("=")
    return name + (sep + shlex.quote(value) if sep else "")


def _one_line(text: str) -> str:
    """``text`` with control characters written as escapes: a comment line of the script stays one line."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text)


def _double_quoted(text: str) -> str:
    """``text`` safe inside a double-quoted bash string."""
    for char in ("\\", '"', "$", "`"):
        text = text.replace(char, "\\" + char)
    return text
