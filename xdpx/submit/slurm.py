"""The Slurm commands x-submit calls: ``sbatch --test-only`` (can the cluster ever run this request?),
then ``sbatch --parsable`` (queue it and read the job id)."""

from __future__ import annotations

import os
import shutil
import subprocess

from xdpx.config.errors import ConfigError
from xdpx.errors import UserError

INSTALL_HINT = ("run x-submit on a machine of the Slurm cluster (a login node), or install Slurm's commands: "
                "on Debian/Ubuntu `apt-get install slurm-client` (a one-machine cluster for tests: "
                "`apt-get install slurm-wlm munge`, docs/submit.md). x-submit --dry prints the job script "
                "without Slurm")


def find_sbatch() -> str:
    """The path of sbatch, or a UserError saying what to install."""
    path = shutil.which("sbatch")
    if path is None:
        raise UserError(f"sbatch is not on PATH: {INSTALL_HINT}")
    return path


def _sbatch(sbatch: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run([sbatch, *args], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired as e:
        raise UserError(f"sbatch did not answer within {e.timeout:.0f} s: Slurm's controller may not be reachable "
                        "(check with `sinfo` or `scontrol ping`); nothing was submitted") from None


def check_request(sbatch: str, script: str) -> None:
    """Ask Slurm whether the job could run at all (nodes, CPUs, memory, GPUs, partition, time limit).

    A plain sbatch would accept an impossible request and leave it pending forever on many clusters;
    ``--test-only`` gets the refusal now, and queues nothing.
    """
    result = _sbatch(sbatch, ["--test-only", script])
    if result.returncode != 0:
        reason = _slurm_message(result)
        unreachable = controller_problem(sbatch)
        if unreachable:  # the environment, not the request: exit 1 (docs/submit.md)
            raise UserError(f"Slurm is not reachable from this machine: `sbatch --test-only` failed ({reason}) and "
                            f"so does `sinfo` ({unreachable}). Check with `sinfo` (it lists the partitions once the "
                            "controller answers) or `scontrol ping`; run x-submit on a login node of the cluster, or "
                            "point SLURM_CONF at its slurm.conf; nothing was submitted")
        raise ConfigError(f"Slurm cannot run this job: {reason}. Ask for what the partition has "
                          "(`sinfo -o '%P %D %c %m %G'` lists nodes, CPUs, memory (MB) and GPUs per partition); "
                          "nothing was submitted")


def controller_problem(sbatch: str) -> str | None:
    """Why Slurm's controller does not answer ``sinfo`` (its message), or None when it answers. A refusal
    of ``sbatch --test-only`` is about the request only when the cluster itself can be asked."""
    sinfo = shutil.which("sinfo") or os.path.join(os.path.dirname(sbatch), "sinfo")
    try:
        result = subprocess.run([sinfo, "-h", "-o", "%P"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        return f"{sinfo} is not installed"
    except subprocess.TimeoutExpired:
        return "no answer within 60 s"
    return None if result.returncode == 0 else _slurm_message(result)


def submit(sbatch: str, script: str) -> str:
    """Queue the job and return its id."""
    result = _sbatch(sbatch, ["--parsable", script])
    if result.returncode != 0:
        raise UserError(f"sbatch refused the job: {_slurm_message(result)}; nothing was submitted")
    # --parsable prints "ID" or "ID;CLUSTER"
    job_id = result.stdout.strip().split(";")[0]
    if not job_id.isdigit():
        raise UserError(f"sbatch answered {result.stdout.strip()!r}, not a job id: check `squeue --me` "
                        "before submitting again")
    return job_id


def _slurm_message(result: subprocess.CompletedProcess[str]) -> str:
    lines = [line.strip() for line in (result.stderr + result.stdout).splitlines() if line.strip()]
    return " / ".join(lines) or f"sbatch exited with status {result.returncode}"
