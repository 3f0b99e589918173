"""x-submit against a real one-node Slurm (munged + slurmctld + slurmd started by the fixture)."""

from __future__ import annotations

from pathlib import Path

from submit_helpers import assert_same_run, job_id_from, local_torchrun, submit, write_config


def test_two_process_job_through_sbatch_equals_a_local_torchrun(slurm, reviews, tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/slurm")
    assert submit(monkeypatch, tmp_path, "--procs-per-node", "2", "--cpus", "2", "x-train", "train.hjson") == 0
    out = capsys.readouterr().out
    job_id = job_id_from(out)
    state = slurm.wait(job_id)
    log = tmp_path / "slurm_jobs" / f"x-train.train.{job_id}.log"
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", log.read_text() + slurm.log()
    assert "x-submit: all 1 step(s) finished" in log.read_text()
    history = (tmp_path / "command_history.txt").read_text().splitlines()
    assert len(history) == 1
    stamp, job, log_column, command = history[0].split("\t")
    assert (job, log_column) == (f"job {job_id}", f"log {log}")
    assert command == "x-submit --procs-per-node 2 --cpus 2 x-train train.hjson"

    local = write_config(tmp_path / "local.hjson", reviews, "runs/local")
    local_torchrun(tmp_path, local)
    assert_same_run(tmp_path / "runs/slurm", tmp_path / "runs/local")


def test_a_node_count_slurm_cannot_give_submits_nothing(slurm, reviews, tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    before = slurm.command("squeue", "-h", "-o", "%i")
    assert submit(monkeypatch, tmp_path, "--nodes", "3", "x-train", "train.hjson") == 2
    err = capsys.readouterr().err
    assert "Slurm cannot run this job" in err and "Requested node configuration is not available" in err
    assert "nothing was submitted" in err
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["train.hjson"]  # no script, log dir, history
    assert slurm.command("squeue", "-h", "-o", "%i") == before
