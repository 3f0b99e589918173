"""The job script x-submit writes, run by bash without a cluster (srun and scontrol stand-ins on PATH): Slurm's
SIGUSR1 during x-train's final evaluation comes when the run has reached its end. x-train finishes it (exit
0), the run marker and state.pt agree that it finished, and the chain goes on to x-eval instead of requeueing
a finished run (which the same command then refused). The signal during the last update, in process:
tests/train/test_preemption.py."""

from __future__ import annotations

import json
import os
import subprocess

from submit_helpers import REPO, submit, write_config

from xdpx.chain import run_chain
from xdpx.io.ownership import RUN_MARKER
from xdpx.models.checkpoints import load_torch

FAULTY = REPO / "tests/train/faulty_components"  # XDPX_TEST_SIGNAL: the run signals itself at a chosen forward

# srun runs the command it is given here; scontrol names this host and records a requeue
SRUN = '#!/bin/bash\nwhile [[ "$1" == --* ]]; do shift; done\nexec "$@"\n'
SCONTROL = '#!/bin/bash\nif [[ "$1" == show ]]; then echo localhost; else echo "$*" >> "$REQUEUED"; fi\n'


def test_a_signal_in_the_final_evaluation_finishes_the_job_and_x_eval_runs(reviews, tmp_path, monkeypatch, capsys):
    # 15 updates, evaluated at 7 and 14 (4 forward calls each), then the final evaluation at 15: the signal
    # comes in its first forward call
    config = write_config(tmp_path / "train.hjson", reviews, "runs/a", model="faulty_cnn", user_dir=str(FAULTY),
                          eval_interval=7)
    (tmp_path / "eval.hjson").write_text('{save_dir: runs/a, valid_subset: dev, save_to_file: dev.tsv, '
                                         'trust_user_dir: true}')
    assert submit(monkeypatch, tmp_path, "--dry", "x-train", "train.hjson", "x-eval", "eval.hjson") == 0
    script = tmp_path / "job.sh"
    script.write_text(capsys.readouterr().out)
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (stand_ins / name).write_text(text)
        (stand_ins / name).chmod(0o755)
    env = {**os.environ, "PATH": f"{stand_ins}{os.pathsep}{os.environ['PATH']}", "SLURM_JOB_ID": "7",
           "SLURM_JOB_NODELIST": "localhost", "SLURM_JOB_NUM_NODES": "1", "REQUEUED": str(tmp_path / "requeued"),
           "XDPX_TEST_SIGNAL": "SIGUSR1:eval:9"}
    job = subprocess.run(["bash", str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    log = job.stdout + job.stderr
    assert job.returncode == 0, log[-3000:]
    assert "x-submit: all 2 step(s) finished" in log and not (tmp_path / "requeued").exists()
    assert (tmp_path / "dev.tsv").read_text().count("\n") == 2  # x-eval ran: header and one row

    run = tmp_path / "runs/a"
    counters = load_torch(str(run / "state.pt"))["counters"]
    assert (counters["num_updates"], counters["finished"], counters["preempted_by"]) == (15, True, None)
    marker = json.loads((run / RUN_MARKER).read_text())
    assert "preempted" not in marker and marker["signal_at_end"]["signal"] == "SIGUSR1"
    steps = [row.split("\t")[1] for row in (run / "valid.log.tsv").read_text().splitlines()[1:]]
    assert steps == ["7", "14", "15"]  # the final evaluation was made, once
    assert ("SIGUSR1 received as the run reached its end: it is not stopped for a requeue but done, with its final "
            "state saved (exit code 0)") in (run / "log.txt").read_text()

    # the same command again (the scheduler may requeue the job itself): nothing to do, not a refusal
    monkeypatch.chdir(tmp_path)
    assert run_chain(["x-train", str(config)]) == 0
    out = capsys.readouterr().out
    assert "runs/a holds a run that finished although SIGUSR1 came at its end (update 15): this run continues it" in out
    assert "runs/a is finished (update 15); nothing to do" in out

