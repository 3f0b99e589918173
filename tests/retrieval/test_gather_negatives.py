"""info_nce's gather_negatives (xdpx/losses/gather.py) on two processes (torchrun, gloo on the CPU): each rank's
loss is the one-process loss of its queries over the whole batch, the summed gradients and a run's updates
those of one process with the whole batch; with gradient caching too; the config refusals."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from gather_runner import SIZE, ThreeTowers, batch, info_nce, loss_and_grads
from retrieval_helpers import train_config
from torch.nn import functional as F

from tests.train.train_helpers import REPO, final_weights, train
from xdpx.cli import run_chain

RUNNER = Path(__file__).resolve().parent / "gather_runner.py"
KILL_RUNNER = REPO / "tests/train/kill_runner.py"


def torchrun(*args: str) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                             *args], capture_output=True, text=True, timeout=180, env=env)
    assert result.returncode == 0, result.stderr[-3000:]


def per_query_losses() -> torch.Tensor:
    """Symmetric info_nce of each query of the whole batch, by hand: (query vs every positive and hard
    negative + positive vs every query) / 2."""
    with torch.no_grad():
        vectors = F.normalize(ThreeTowers()(**batch()["net_input"]), dim=-1)
    queries, positives, negatives = vectors[:, 0], vectors[:, 1], vectors[:, 2]
    labels = torch.arange(SIZE)
    forward = F.cross_entropy(queries @ torch.cat([positives, negatives]).T / 0.05, labels, reduction="none")
    backward = F.cross_entropy(positives @ queries.T / 0.05, labels, reduction="none")
    return (forward + backward) / 2


def test_each_rank_scores_its_queries_against_the_whole_batch_and_the_gradients_are_one_process(tmp_path):
    torchrun(str(RUNNER), str(tmp_path))
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    expected = per_query_losses()
    whole_loss, whole_grads = loss_and_grads(ThreeTowers(), info_nce(False), batch())
    assert float(expected.sum()) == pytest.approx(whole_loss, rel=1e-6)
    for case in ("plain", "cached"):  # rank r holds the rows r, r + 2, ... (6 and 5 of 11)
        for r in (0, 1):
            assert ranks[r][case]["loss"] == pytest.approx(float(expected[r::2].sum()), rel=1e-6, abs=1e-6), case
        for ours, theirs in zip(ranks[0][case]["grads"], whole_grads):
            torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)
    # a stand-in micro-batch adds no candidate: rank 0's loss and the gradients are the whole batch's alone
    assert ranks[0]["stand_in"]["loss"] == pytest.approx(whole_loss, rel=1e-6) and ranks[1]["stand_in"]["loss"] == 0
    for ours, theirs in zip(ranks[1]["stand_in"]["grads"], whole_grads):
        torch.testing.assert_close(ours, theirs, rtol=1e-5, atol=1e-5)


def test_two_processes_with_gathered_negatives_update_as_one_process_with_the_whole_batch(retrieval_data, tmp_path):
    common = {"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0, "max_epoch": 1, "eval_interval": 100,
              "symmetric": True, "resume": False}
    # 100 pairs in updates of 2 x 8 = 16 (the last: 4); the processes' gradient-cached chunks are gathered
    for name in ("ddp", "one"):
        (tmp_path / name).mkdir()
    ddp = train_config(tmp_path / "ddp", retrieval_data, **common, batch_size=8, gather_negatives=True,
                       mini_batch_size=3)
    one = train_config(tmp_path / "one", retrieval_data, **common, batch_size=16)
    torchrun(str(KILL_RUNNER), str(ddp), "never", "0")
    assert train(one) == 0
    expected = final_weights(tmp_path / "one" / "run")
    # Adam divides each gradient by its own running scale: the float noise of chunked, gathered sums on a
    # nearly-zero gradient moves a weight by a few 1e-6 (a step is 1e-3); local negatives alone move the losses
    # below in their second digit
    for key, value in final_weights(tmp_path / "ddp" / "run").items():
        torch.testing.assert_close(value, expected[key], rtol=1e-4, atol=2e-5, msg=key)
    losses = [train_losses(tmp_path / name / "run") for name in ("ddp", "one")]
    assert losses[0] and losses[0] == pytest.approx(losses[1], rel=1e-5)


def train_losses(run: Path) -> list[float]:
    header, *rows = [line.split("\t") for line in (run / "train.log.tsv").read_text().splitlines()]
    return [float(row[header.index("loss")]) for row in rows]


@pytest.mark.parametrize("overrides, message", [
    ({"update_freq": 2}, "gather_negatives pairs each process's micro-batch with the other processes' and needs "
                         "the same number on each: set update_freq: 1 and auto_ga: false"),
    ({"fsdp": True}, "gather_negatives is built for DDP (one process: no effect); with fsdp or use_bmuf set "
                     "gather_negatives: false"),
])
def test_gather_negatives_with_more_micro_batches_or_fsdp_is_refused(retrieval_data, tmp_path, capsys, overrides,
                                                                      message):
    code = run_chain(["x-train", str(train_config(tmp_path, retrieval_data, gather_negatives=True, **overrides)),
                      "--dry"])
    out = capsys.readouterr()
    assert code == 2 and message in out.out + out.err, out
