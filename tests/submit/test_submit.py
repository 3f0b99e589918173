"""x-submit without a cluster: the checks before anything is queued, --dry, the questions on a terminal."""

from __future__ import annotations

import builtins
import os
import subprocess
import sys
from pathlib import Path

import pytest
from submit_helpers import REPO, submit, write_config

from xdpx.submit.request import JobRequest, ask_missing


def no_questions(prompt: str) -> str:
    raise AssertionError(f"x-submit asked {prompt!r} without a terminal")


def test_dry_prints_a_multi_node_script_and_writes_nothing(reviews, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(builtins, "input", no_questions)  # stdin is not a terminal under pytest
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    (tmp_path / "prepro.hjson").write_text(
        f'{{__parent__: "{REPO}/examples/prepro/reviews_char", data_source: "{REPO}/examples/data/sample/reviews", '
        f'data_dir: data2}}')
    assert submit(monkeypatch, tmp_path, "--nodes", "2", "--gpus-per-node", "4", "--cpus", "32", "--mem", "64",
                  "--time", "2:00:00", "--partition", "gpu", "--dry",
                  "x-prepro", "prepro.hjson", "x-train", "train.hjson") == 0
    captured = capsys.readouterr()
    script = captured.out
    for directive in ("--job-name=x-prepro.prepro", "--nodes=2", "--ntasks-per-node=1", "--cpus-per-task=32",
                      "--gpus-per-node=4", "--mem=64G", "--time=2:00:00", "--partition=gpu",
                      f"--output={tmp_path}/slurm_jobs/x-prepro.prepro.%j.log", f"--chdir={tmp_path}",
                      "--export=ALL", "--signal=USR1@120", "--requeue", "--open-mode=append"):
        assert f"#SBATCH {directive}\n" in script
    assert 'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)' in script
    # x-prepro once, on one process; x-train on both nodes, 4 processes each, c10d rendezvous on the first
    assert f"srun --nodes=1 --ntasks=1 --cpus-per-task=32 {sys.executable} -m xdpx.submit.chain x-prepro prepro.hjson" \
        in script
    # torchrun through xdpx.submit.launch: it ignores Slurm's SIGUSR1 and passes the ranks' exit 3 on
    assert f"--kill-on-bad-exit=1 \\\n        {sys.executable} -m xdpx.submit.launch --nnodes=2 --nproc_per_node=4" \
        in script
    assert '--rdzv_backend=c10d --rdzv_id="$SLURM_JOB_ID.2" --rdzv_endpoint="$MASTER_ADDR:$((MASTER_PORT + 2))"' \
        in script
    assert script.index("x-prepro prepro.hjson") < script.index("-m xdpx.submit.chain x-train train.hjson")
    assert "submit again: x-submit --nodes 2" in script and "--dry" not in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert "2 step(s) checked (--dry: nothing submitted)" in captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prepro.hjson", "train.hjson"]


def test_a_config_that_fails_the_dry_checks_submits_nothing(reviews, tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/a", learning_rate="fast", batch_sise=8)
    assert submit(monkeypatch, tmp_path, "--nodes", "1", "x-train", "train.hjson") == 2
    err = capsys.readouterr().err
    assert "train.hjson" in err and "learning_rate" in err and "batch_sise" in err and "batch_size" in err
    assert "1 of 1 step(s) do not pass the --dry checks (above); nothing was submitted" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.hjson"]


def test_a_missing_data_dir_fails_before_the_queue(tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", tmp_path / "no-data", "runs/a")
    assert submit(monkeypatch, tmp_path, "x-train", "train.hjson") == 2
    err = capsys.readouterr().err
    assert "no-data" in err and "nothing was submitted" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.hjson"]


def test_missing_sbatch_says_what_to_install_and_leaves_nothing(reviews, tmp_path, monkeypatch, capsys):
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert submit(monkeypatch, tmp_path, "--procs-per-node", "2", "x-train", "train.hjson") == 1
    err = capsys.readouterr().err
    assert "sbatch is not on PATH" in err and "apt-get install slurm-client" in err and "x-submit --dry" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "train.hjson"]


@pytest.mark.parametrize(("argv", "message"), [
    (["--nodes", "0", "x-train", "a.hjson"], "--nodes must be a whole number >= 1, got '0'"),
    (["--mem", "lots", "x-train", "a.hjson"], "--mem takes e.g. 16 (gigabytes), 16G or 500M, got 'lots'"),
    (["--gpus", "2", "x-train", "a.hjson"], "unknown flag '--gpus'"),
    (["--nodes", "2"], "give the commands to run"),
    (["x-trian", "a.hjson"], "unknown command 'x-trian'"),
])
def test_bad_flags_are_usage_errors(argv, message, tmp_path, monkeypatch, capsys):
    assert submit(monkeypatch, tmp_path, *argv) == 2
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_on_a_terminal_without_flags_it_asks_like_pai_sh(capsys):
    answers = iter(["2", "many", "8", "", "", "64", "4:00:00", ""])  # "many" is asked again
    request = ask_missing(JobRequest(), ask=lambda prompt: next(answers))
    assert (request.nodes, request.gpus_per_node, request.processes_per_node, request.cpus_per_node,
            request.slurm_mem, request.time, request.partition) == (2, 8, 8, 8, "64G", "4:00:00", None)
    assert "GPUs per node must be a whole number >= 0, got 'many'" in capsys.readouterr().err


def test_missing_slurm_fails_in_ci_and_skips_elsewhere(tmp_path):
    """CI sets XDPX_REQUIRE_SLURM=1: there a machine without Slurm fails the Slurm tests, never skips them."""
    test = f"{Path(__file__).parent / 'test_submit_slurm.py'}::test_a_node_count_slurm_cannot_give_submits_nothing"
    env = {**os.environ, "PATH": str(tmp_path)}  # no sbatch, slurmd, munged... here
    for required in (True, False):
        env.pop("XDPX_REQUIRE_SLURM", None)
        if required:
            env["XDPX_REQUIRE_SLURM"] = "1"
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-rs", test],
                                capture_output=True, text=True, env=env, cwd=Path(__file__).parent, timeout=300)
        if required:
            assert result.returncode == 1 and "XDPX_REQUIRE_SLURM=1 but Slurm is not installed" in result.stdout
        else:
            assert result.returncode == 0 and "SKIPPED [1]" in result.stdout
            assert "apt-get install -y slurm-wlm munge" in result.stdout


def test_the_checks_see_the_processes_of_the_job(reviews, tmp_path, monkeypatch, capsys):
    """16 processes x batch 16 exceed the 240 training samples: refused before the queue, though the same
    config passes --dry on this one-process machine."""
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    assert submit(monkeypatch, tmp_path, "--dry", "x-train", "train.hjson") == 0
    capsys.readouterr()
    assert submit(monkeypatch, tmp_path, "--nodes", "2", "--procs-per-node", "8", "--dry",
                  "x-train", "train.hjson") == 2
    err = capsys.readouterr().err
    assert "batch_size x update_freq x processes = 256 is larger than the training set (240 samples)" in err
    assert "WORLD_SIZE" not in os.environ
