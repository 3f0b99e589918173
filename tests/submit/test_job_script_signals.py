"""The job x-submit writes, on the real one-node Slurm (slurm_cluster.py): a SIGUSR1 during x-train's final
evaluation comes when the run has reached its end. x-train finishes it (exit 0), the run marker and state.pt
agree that it finished, the job is not requeued and the chain goes on to x-eval (a requeue of a finished run
used to be refused by the same command). The signal during the last update, in process:
tests/train/test_preemption.py."""

from __future__ import annotations

import json

from submit_helpers import REPO, job_id_from, submit, write_config

from xdpx.chain import run_chain
from xdpx.io.ownership import RUN_MARKER
from xdpx.models.checkpoints import load_torch

FAULTY = REPO / "tests/train/faulty_components"  # XDPX_TEST_SIGNAL: the run signals itself at a chosen forward


def test_a_signal_in_the_final_evaluation_finishes_the_job_and_x_eval_runs(slurm, reviews, tmp_path, monkeypatch,
                                                                           capsys):
    # 15 updates, evaluated at 7 and 14 (4 forward calls each), then the final evaluation at 15: the signal
    # comes in its first forward call, from x-train's own process, as Slurm's --signal would come to the step
    config = write_config(tmp_path / "train.hjson", reviews, "runs/a", model="faulty_cnn", user_dir=str(FAULTY),
                          eval_interval=7)
    (tmp_path / "eval.hjson").write_text('{save_dir: runs/a, valid_subset: dev, save_to_file: dev.tsv, '
                                         'trust_user_dir: true}')
    monkeypatch.setenv("XDPX_TEST_SIGNAL", "SIGUSR1:eval:9")  # the job inherits the environment (--export=ALL)
    assert submit(monkeypatch, tmp_path, "--cpus", "1", "x-train", "train.hjson", "x-eval", "eval.hjson") == 0
    job_id = job_id_from(capsys.readouterr().out)
    state = slurm.wait(job_id, timeout=300)
    [log_path] = (tmp_path / "slurm_jobs").glob(f"*.{job_id}.log")
    log = log_path.read_text()
    assert (state["JobState"], state["Restarts"]) == ("COMPLETED", "0"), f"{state}\n{log}\n{slurm.log()}"
    assert "x-submit: all 2 step(s) finished" in log and "requeueing the job" not in log
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

