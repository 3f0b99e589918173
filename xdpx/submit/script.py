"""The sbatch script of a submission: one srun step per config of the chain, in order.

x-train, x-eval and x-pred steps run on every node: srun starts one torchrun per node, and torchrun
starts ``procs_per_node`` processes there, meeting the other nodes through a c10d rendezvous hosted on
the first node of the allocation. Other commands (x-prepro, x-viz, exports) run once, as one process on
the first node, as they would in a local chain. The chain stops at the first failing step with
a message saying how to resume.
"""

from __future__ import annotations

import re
import shlex
import time

from xdpx.io.credentials import redact
from xdpx.submit.request import JobRequest


def runs_on_every_node(name: str) -> bool:
    """Commands that take part on every process (``every_rank``: x-train, and x-eval / x-pred with their
    sharded evaluation) run as a torchrun job on every node; the others as one process."""
    from xdpx.command import get_command

    return bool(get_command(name).every_rank)


def job_steps(chain: list[tuple[str, list[str]]]) -> list[tuple[str, str]]:
    """``[('x-train', ['a', 'b']), ('x-eval', ['c'])]`` -> one (command, config) step per config file."""
    return [(name, path) for name, paths in chain for path in paths]


def render_script(request: JobRequest, steps: list[tuple[str, str]], *, python: str, workdir: str,
                  log_path: str, job_name: str, command_line: list[str]) -> str:
    """The text of the sbatch script; ``log_path`` may hold Slurm's ``%j`` (the job id)."""
    q = shlex.quote  # every value, though request.py has checked it against Slurm's syntax already
    shown = _one_line(redact(shlex.join(command_line)))  # for the comments and messages: credentials masked
    directives = [
        f"--job-name={q(job_name)}",
        f"--nodes={request.nodes}",
        "--ntasks-per-node=1",  # one torchrun per node; it starts the processes of that node
        f"--cpus-per-task={request.cpus_per_node}",
        *([f"--gpus-per-node={request.gpus_per_node}"] if request.gpus_per_node else []),
        *([f"--mem={q(request.slurm_mem)}"] if request.slurm_mem else []),
        *([f"--time={q(request.time)}"] if request.time else []),
        *([f"--partition={q(request.partition)}"] if request.partition else []),
        # sbatch reads #SBATCH values with the shell's quotes (no backslash: request.script_safe refuses it)
        f"--output={q(log_path)}",
        f"--chdir={q(workdir)}",
        "--export=ALL",  # the job sees the submitting shell's environment (PATH, PYTHONPATH, credentials' env)
    ]
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
        'echo "x-submit: job $SLURM_JOB_ID on $SLURM_JOB_NUM_NODES node(s) ($SLURM_JOB_NODELIST), '
        'rendezvous on $MASTER_ADDR"',
        "",
        "failed() {  # step number, step, exit status",
        '    echo "x-submit: step $1 ($2) failed with exit status $3 in job $SLURM_JOB_ID; the steps after it '
        'did not run." >&2',
        '    echo "x-submit: x-train keeps its last saved state in save_dir: to continue from it, set resume: '
        'true in that config and submit again: ' + _double_quoted(shown) + '" >&2',
        '    exit "$3"',
        "}",
        "",
    ]
    for number, (name, path) in enumerate(steps, start=1):
        label = _one_line(redact(f"{name} {path}"))
        lines.append(f"echo {q(f'x-submit: step {number}/{len(steps)}: {label}')}")
        if runs_on_every_node(name):
            lines.append(
                f"srun --nodes={request.nodes} --ntasks-per-node=1 --cpus-per-task={request.cpus_per_node} "
                f"--kill-on-bad-exit=1 \\\n"
                f"    {q(python)} -m torch.distributed.run --nnodes={request.nodes} "
                f"--nproc_per_node={request.processes_per_node} \\\n"
                f"    --rdzv_backend=c10d --rdzv_id=\"$SLURM_JOB_ID.{number}\" "
                f"--rdzv_endpoint=\"$MASTER_ADDR:$((MASTER_PORT + {number}))\" \\\n"
                f"    -m xdpx.submit.chain {q(name)} {q(path)} \\\n"
                f"    || failed {number} {q(label)} $?"
            )
        else:
            lines.append(
                f"srun --nodes=1 --ntasks=1 --cpus-per-task={request.cpus_per_node} "
                f"{q(python)} -m xdpx.submit.chain {q(name)} {q(path)} \\\n"
                f"    || failed {number} {q(label)} $?"
            )
    lines.append(f"echo {q(f'x-submit: all {len(steps)} step(s) finished')}")
    return "\n".join(lines) + "\n"


def _one_line(text: str) -> str:
    """``text`` with control characters written as escapes: a comment line of the script stays one line."""
    return re.sub(r"[\x00-\x1f\x7f]", lambda m: f"\\x{ord(m.group()):02x}", text)


def _double_quoted(text: str) -> str:
    """``text`` safe inside a double-quoted bash string."""
    for char in ("\\", '"', "$", "`"):
        text = text.replace(char, "\\" + char)
    return text
