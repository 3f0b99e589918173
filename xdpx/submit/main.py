"""``x-submit [flags] x-train config.hjson [x-eval eval.hjson ...]``: check, write, try, submit, record.

Nothing reaches the queue unless every config of the chain passes the checks of ``--dry`` and Slurm
says it can run the request; a refused submission leaves no script and no history line behind.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path

from xdpx.chain import split_chain
from xdpx.config.errors import ConfigError
from xdpx.errors import EXIT_CONFIG, EXIT_FAILED, UserError
from xdpx.submit import slurm
from xdpx.submit.checks import check_layout, check_steps, step_outputs
from xdpx.submit.history import append_history
from xdpx.submit.jobs import JOB_COMMANDS, job_command
from xdpx.submit.request import RESOURCE_FLAGS, ask_missing, parse_request, script_safe
from xdpx.submit.script import array_size, job_steps, render_script


def main(argv: list[str], *, interactive: bool | None = None) -> int:
    """x-submit; ``interactive``: may ask for missing flags (default: when stdin and stdout are terminals)."""
    if argv[:1] and argv[0] in JOB_COMMANDS:  # x-submit status|cancel|logs JOB_ID|RUN_DIR
        return job_command(argv[0], argv[1:])
    command_line = ["x-submit", *argv]
    try:
        request, chain, given = parse_request(argv)
        steps = job_steps(split_chain(chain)[0])
        # the folders and the Python go into the script too: refused before any check when it cannot carry them
        workdir = Path(script_safe("the current folder", str(Path.cwd())))
        log_dir = Path(script_safe("--log-dir", str((workdir / request.log_dir).resolve())))
        script_safe("the Python", sys.executable)
    except ConfigError as e:
        print(f"x-submit: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    if interactive is None:
        interactive = bool(sys.stdin and sys.stdin.isatty() and sys.stdout.isatty())
    if interactive and not given & set(RESOURCE_FLAGS):
        request = ask_missing(request)
    failed = check_steps(steps, request)
    if failed:
        print(f"x-submit: error: {failed} of {len(steps)} step(s) do not pass the --dry checks (above); "
              "nothing was submitted", file=sys.stderr)
        return EXIT_CONFIG
    try:
        runs = check_layout(steps, request)
    except ConfigError as e:
        print(f"x-submit: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    tasks = array_size(runs, request)

    # the name is a file name and an #SBATCH value: keep it to letters, digits and ._+- (--job-name is checked)
    job_name = re.sub(r"[^\w.+-]+", "_", request.job_name or f"{steps[0][0]}.{Path(steps[0][1]).stem}")
    log_pattern = "%A_%a" if tasks else "%j"
    text = render_script(request, steps, python=sys.executable, workdir=str(workdir),
                         log_path=str(log_dir / f"{job_name}.{log_pattern}.log"), job_name=job_name,
                         command_line=[t for t in command_line if t != "--dry"], runs=runs)
    if request.dry:
        print(text, end="")
        print(f"x-submit: {len(steps)} step(s) checked (--dry: nothing submitted)", file=sys.stderr)
        return 0
    try:
        job_id, script_path = _submit(text, log_dir, job_name)
    except ConfigError as e:
        print(f"x-submit: error: {e}", file=sys.stderr)
        return EXIT_CONFIG
    except UserError as e:
        print(f"x-submit: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    log_path = str(log_dir / f"{job_name}.{job_id}{'_*' if tasks else ''}.log")
    history = append_history(workdir, command_line, job_id, log_path, outputs=step_outputs(steps, workdir))
    shape = (f"an array of {tasks} task(s)" + (f", at most {request.max_parallel} at once" if request.max_parallel
                                               else "") + ", each " if tasks else "")
    print(f"x-submit: submitted job {job_id} ({shape}{len(steps)} step(s), {request.nodes} node(s) x "
          f"{request.processes_per_node} process(es))\n  script  {script_path}\n  log     {log_path}\n"
          f"  history {history}\n  follow it with: x-submit status {job_id}; x-submit logs {job_id}")
    return 0


def _submit(text: str, log_dir: Path, job_name: str) -> tuple[str, Path]:
    """Write the script, try it, submit it; on any refusal remove what this call created."""
    sbatch = slurm.find_sbatch()
    created_dir = not log_dir.exists()
    log_dir.mkdir(parents=True, exist_ok=True)
    script_path = log_dir / f"{job_name}.{time.strftime('%Y%m%d-%H%M%S')}.{os.getpid()}.sbatch"
    script_path.write_text(text)
    try:
        slurm.check_request(sbatch, str(script_path))
        return slurm.submit(sbatch, str(script_path)), script_path
    except BaseException:
        script_path.unlink()
        if created_dir and not any(log_dir.iterdir()):
            log_dir.rmdir()
        raise
