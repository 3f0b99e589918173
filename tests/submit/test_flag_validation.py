"""x-submit refuses a flag value outside Slurm's syntax for that flag before anything is checked, written or
submitted (--dry too), and quotes every value that reaches the job script: a line break or `;` in a flag
never becomes a command of the script.

Before the validation, ``--partition $'gpu\\nrm -rf ~'`` (or ``--time``, ``--job-name``, ``--log-dir``) passed
``--dry`` and put the second line into the script as a shell command; a config named with a line break did
the same through the script's comment line.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from submit_helpers import submit, write_config

from xdpx.submit.request import JobRequest, ask_missing
from xdpx.submit.script import render_script

INJECTIONS = ["gpu\ntouch {marker}", "gpu; touch {marker}", "$(touch {marker})", "`touch {marker}`",
              "gpu\r\ntouch {marker}"]
# the flag and a word of the expected form its refusal names
FLAGS = [("--partition", "partition name"), ("--time", "D-HH:MM:SS"), ("--job-name", "letters, digits"),
         ("--log-dir", "folder of letters"), ("--mem", "16G"), ("--nodes", "whole number"),
         ("--gpus-per-node", "whole number"), ("--procs-per-node", "whole number"), ("--cpus", "whole number"),
         ("--constraint", "node features"), ("--account", "account name"), ("--qos", "QOS name"),
         ("--reservation", "reservation name"), ("--sbatch", "--sbatch=--NAME=VALUE"),
         ("--signal-grace", "whole number"), ("--max-parallel", "whole number"), ("--workers", "whole number")]


@pytest.fixture
def valid_config(reviews: Path, tmp_path: Path) -> Path:
    """A config that passes the --dry checks: only the flag can make x-submit refuse."""
    return write_config(tmp_path / "train.hjson", reviews, "runs/a")


def one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("x-submit: error: "), err
    return lines[0]


@pytest.mark.parametrize("dry", [True, False])
@pytest.mark.parametrize("payload", INJECTIONS)
@pytest.mark.parametrize(("flag", "form"), FLAGS)
def test_shell_syntax_in_any_flag_is_refused_before_anything_is_written(flag, form, payload, dry, valid_config,
                                                                       tmp_path, monkeypatch, capsys):
    marker = tmp_path / "injected"
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no sbatch: only the validation can answer
    value = payload.format(marker=marker)
    argv = [flag, value, *(["--dry"] if dry else []), "x-train", "train.hjson"]
    assert submit(monkeypatch, tmp_path, *argv) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert flag in line and form in line and repr(value) in line  # the flag, the form it takes, the value
    assert "--dry checks" not in line  # refused before the configs are checked
    assert captured.out == ""  # no script printed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin", "train.hjson"]  # no script, log dir, history
    assert not marker.exists()


def test_a_chain_argument_with_a_line_break_is_refused(valid_config, tmp_path, monkeypatch, capsys):
    """A config file named with a line break: the script's comment line would end there and the rest of
    the name would run as a command."""
    odd = tmp_path / "train\ntouch injected.hjson"
    odd.write_text(valid_config.read_text())
    assert submit(monkeypatch, tmp_path, "--dry", "x-train", odd.name) == 2
    captured = capsys.readouterr()
    line = one_error_line(captured.err)
    assert repr(odd.name) in line and "line break" in line
    assert captured.out == ""


@pytest.mark.parametrize(("flags", "directives"), [
    (["--time", "1-00:00:00", "--partition", "gpu,debug", "--job-name", "my.job+1"],
     ["--time=1-00:00:00", "--partition=gpu,debug", "--job-name=my.job+1"]),
    (["--time", "30"], ["--time=30"]),
    (["--time", "2:30"], ["--time=2:30"]),
    (["--time", "2:00:00"], ["--time=2:00:00"]),
    (["--time", "3-12"], ["--time=3-12"]),
    (["--time", "3-12:30"], ["--time=3-12:30"]),
    (["--time", "UNLIMITED"], ["--time=UNLIMITED"]),
    (["--mem", "500m"], ["--mem=500M"]),
])
def test_valid_values_still_make_a_script(flags, directives, valid_config, tmp_path, monkeypatch, capsys):
    assert submit(monkeypatch, tmp_path, *flags, "--dry", "x-train", "train.hjson") == 0
    script = capsys.readouterr().out
    for directive in directives:
        assert f"#SBATCH {directive}\n" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_folders_are_quoted_for_sbatch_and_bash(reviews, tmp_path, monkeypatch, capsys):
    """sbatch reads an unquoted ``#`` in an #SBATCH line as the start of a comment: the folder the job runs
    in and writes its log to would be cut there."""
    folder = tmp_path / "proj #1"
    folder.mkdir()
    write_config(folder / "train.hjson", reviews, "runs/a")
    assert submit(monkeypatch, folder, "--log-dir", "job logs", "--dry", "x-train", "train.hjson") == 0
    script = capsys.readouterr().out
    assert f"#SBATCH --output='{folder}/job logs/x-train.train.%j.log'\n" in script
    assert f"#SBATCH --chdir='{folder}'\n" in script
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0


def test_values_that_reach_the_script_are_quoted_even_unchecked():
    """render_script quotes what it writes, whatever request.py let through."""
    request = JobRequest(time="1:00:00; touch x", partition="a b")
    script = render_script(request, [("x-prepro", "c; touch y.hjson")], python=sys.executable, workdir="/tmp/w d",
                           log_path="/tmp/w d/l.%j.log", job_name="j", command_line=["x-submit", "a\ntouch z"])
    assert "#SBATCH --time='1:00:00; touch x'\n" in script
    assert "#SBATCH --partition='a b'\n" in script
    assert "#   x-submit 'a\\x0atouch z'\n" in script  # the comment stays one line
    assert "'c; touch y.hjson'" in script


def test_the_terminal_questions_check_the_same_syntax(capsys):
    answers = iter(["1", "0", "1", "1", "", "2:00:00\nrm -rf ~", "1:00:00", "gpu;x", "gpu"])
    request = ask_missing(JobRequest(), ask=lambda prompt: next(answers))
    assert (request.time, request.partition) == ("1:00:00", "gpu")
    err = capsys.readouterr().err
    assert "--time takes Slurm's time format" in err and "--partition takes a Slurm partition name" in err


def test_sbatch_reads_the_quoted_values(slurm, tmp_path):
    """The #SBATCH lines x-submit writes, quoting included, are read by the real sbatch as meant: a job made
    of them runs in a folder with quotes, a space and a ``#`` (x-submit once wrapped such a value in double
    quotes, which its own quotes ended), with that name and time limit, and writes its log there."""
    folder = tmp_path / 'say "hi" #1'
    (folder / "job logs").mkdir(parents=True)
    request = JobRequest(time="0-00:10", partition="debug")
    script = render_script(request, [], python=sys.executable, workdir=str(folder),
                           log_path=str(folder / "job logs" / "my.job+1.%j.log"), job_name="my.job+1",
                           command_line=["x-submit", "--log-dir", "job logs"])
    header = [line for line in script.splitlines() if line.startswith(("#!", "#SBATCH"))]
    path = tmp_path / "probe.sbatch"
    path.write_text("\n".join(header + ['echo "ran in $PWD"']) + "\n")
    result = subprocess.run(["sbatch", "--parsable", str(path)], capture_output=True, text=True,
                            env=slurm.env(), timeout=60)
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip().split(";")[0]
    state = slurm.wait(job_id)
    assert state["JobState"] == "COMPLETED", slurm.log()
    assert state["JobName"] == "my.job+1" and state["TimeLimit"] == "00:10:00" and state["Partition"] == "debug"
    assert (folder / "job logs" / f"my.job+1.{job_id}.log").read_text().strip() == f"ran in {folder}"
