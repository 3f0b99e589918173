"""x-submit where Slurm's commands are installed but its controller does not answer (a slurm.conf naming a
port nobody listens on): an environment problem, exit 1, a message saying Slurm is not reachable, which
command failed and how to check (`sinfo`); nothing written or submitted."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from submit_helpers import submit, write_config

from xdpx.errors import EXIT_FAILED

UNREACHABLE_CONF = """\
ClusterName=unreachable
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=1
AuthType=auth/munge
MessageTimeout=1
TCPTimeout=1
NodeName=localhost NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES
"""


@pytest.mark.skipif(shutil.which("sbatch") is None or shutil.which("sinfo") is None,
                    reason="Slurm's client commands (sbatch, sinfo) are not installed")
def test_an_unreachable_controller_is_an_environment_error(reviews, tmp_path: Path, monkeypatch, capsys) -> None:
    conf = tmp_path.parent / f"{tmp_path.name}.slurm.conf"  # outside the folder that must stay unchanged
    conf.write_text(UNREACHABLE_CONF)
    monkeypatch.setenv("SLURM_CONF", str(conf))
    write_config(tmp_path / "train.hjson", reviews, "runs/a")
    assert submit(monkeypatch, tmp_path, "x-train", "train.hjson") == EXIT_FAILED
    err = capsys.readouterr().err
    assert "x-submit: error: Slurm is not reachable from this machine: `sbatch --test-only` failed (" in err, err
    assert "Unable to contact slurm controller" in err and "Check with `sinfo`" in err, err
    assert "Ask for what the partition has" not in err  # not blamed on the request
    assert "nothing was submitted" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["train.hjson"]  # no script, log dir, history
