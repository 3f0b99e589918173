"""x-submit against a real one-node Slurm (munged + slurmctld + slurmd started by the fixture)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from submit_helpers import assert_same_run, job_id_from, submit, write_config

DYING_RANK = Path(__file__).resolve().parent / "dying_rank"


@pytest.mark.slow
def test_two_process_job_through_sbatch_equals_a_local_torchrun(slurm, reviews, local_run, tmp_path, monkeypatch,
                                                                capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/slurm")
    # x-eval reads the run that step 1 writes: left for the job by the checks; sharded over the 2 processes there
    (tmp_path / "eval.hjson").write_text('{save_dir: runs/slurm, valid_subset: dev, save_to_file: dev.tsv}')
    flags = ["--procs-per-node", "2", "--cpus", "2", "x-train", "train.hjson", "x-eval", "eval.hjson"]
    assert submit(monkeypatch, tmp_path, *flags) == 0
    captured = capsys.readouterr()
    assert "step 2 (x-eval eval.hjson) reads 'runs/slurm', which step 1 writes" in captured.err
    job_id = job_id_from(captured.out)
    state = slurm.wait(job_id)
    log = tmp_path / "slurm_jobs" / f"x-train.train.{job_id}.log"
    assert state["JobState"] == "COMPLETED" and state["ExitCode"] == "0:0", log.read_text() + slurm.log()
    assert "x-submit: all 2 step(s) finished" in log.read_text()
    history = (tmp_path / "command_history.txt").read_text().splitlines()
    assert len(history) == 1
    stamp, job, log_column, command, runs = history[0].split("\t")
    assert (job, log_column) == (f"job {job_id}", f"log {log}")
    assert command == "x-submit " + " ".join(flags)
    assert runs == f"runs {tmp_path / 'runs/slurm'}"  # x-eval's output is known only once x-train ran

    assert_same_run(tmp_path / "runs/slurm", local_run)
    header, row = (tmp_path / "dev.tsv").read_text().splitlines()
    results = dict(zip(header.split("\t"), row.split("\t")))
    valid = (local_run / "valid.log.tsv").read_text().splitlines()
    best = dict(zip(valid[0].split("\t"), valid[1].split("\t")))  # update 5, the best (loss differs at 8)
    assert results["checkpoint"].endswith(f"checkpoint-{best['step']}.pt")
    assert (results["subset"], results["samples"], results["loss"], results["accuracy"]) == \
        ("dev", "60", best["loss"], best["accuracy"])


@pytest.mark.slow
def test_a_rank_killed_mid_run_fails_the_job_clearly_and_resume_finishes_it(slurm, reviews, local_run, tmp_path,
                                                                            monkeypatch, capsys):
    config = write_config(tmp_path / "train.hjson", reviews, "runs/slurm", user_dir=str(DYING_RANK))
    monkeypatch.setenv("XDPX_TEST_DIE_AT_UPDATE", "7")  # after the state saved at update 5
    flags = ["--procs-per-node", "2", "--cpus", "2", "x-train", "train.hjson"]
    assert submit(monkeypatch, tmp_path, *flags) == 0
    job_id = job_id_from(capsys.readouterr().out)
    state = slurm.wait(job_id)
    log = (tmp_path / "slurm_jobs" / f"x-train.train.{job_id}.log").read_text()
    assert state["JobState"] == "FAILED", log
    assert "x-submit: step 1 (x-train train.hjson) failed with exit status 1" in log
    assert ("set resume: true in that config and submit again: x-submit --procs-per-node 2 --cpus 2 "
            "x-train train.hjson") in log
    assert "all 1 step(s) finished" not in log
    assert (tmp_path / "runs/slurm/valid.log.tsv").read_text().count("\n") == 2  # header + update 5

    # the documented recovery: resume: true in the config, the same x-submit line
    monkeypatch.delenv("XDPX_TEST_DIE_AT_UPDATE")
    config.write_text(json.dumps({**json.loads(config.read_text()), "resume": True}))
    assert submit(monkeypatch, tmp_path, *flags) == 0
    job_id = job_id_from(capsys.readouterr().out)
    state = slurm.wait(job_id)
    log = (tmp_path / "slurm_jobs" / f"x-train.train.{job_id}.log").read_text()
    assert state["JobState"] == "COMPLETED", log
    assert "from update 5" in log
    assert_same_run(tmp_path / "runs/slurm", local_run)
    assert len((tmp_path / "command_history.txt").read_text().splitlines()) == 2


def test_a_node_count_slurm_cannot_give_submits_nothing(slurm, reviews, tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    before = slurm.command("squeue", "-h", "-o", "%i")
    assert submit(monkeypatch, tmp_path, "--nodes", "3", "x-train", "train.hjson") == 2
    err = capsys.readouterr().err
    assert "Slurm cannot run this job" in err and "Requested node configuration is not available" in err
    assert "nothing was submitted" in err
    assert sorted(p.name for p in Path(tmp_path).iterdir()) == ["train.hjson"]  # no script, log dir, history
    assert slurm.command("squeue", "-h", "-o", "%i") == before
