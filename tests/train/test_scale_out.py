"""Several processes (torchrun, gloo on the CPU): loops and chains finish, evaluation and prediction are
sharded and give the one-process numbers and files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from train_helpers import write_config

from xdpx.cli import run_chain
from xdpx.io.testing import free_port

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
CHAIN_RUNNER = HERE / "chain_runner.py"


COMMON = {"dropout": 0.0, "max_epoch": 1, "eval_interval": 5, "warmup_steps": 0, "viz": False, "cpu": True}


@pytest.fixture(scope="module")
def one_process_weights(reviews, tmp_path_factory):
    """Final weights of one process with batch 16: what 2 processes with batch 8 must reach."""
    from train_helpers import final_weights, train

    folder = tmp_path_factory.mktemp("one")
    assert train(write_config(folder / "one.hjson", reviews, folder / "one", **COMMON, batch_size=16)) == 0
    return final_weights(folder / "one")


def assert_weights_equal(save_dir: Path, expected: dict) -> None:
    from train_helpers import final_weights

    for key, value in final_weights(save_dir).items():
        assert torch.allclose(value, expected[key], rtol=0, atol=1e-6), key


def torchrun(*args: str, nproc: int = 2, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        [str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           f"--nproc_per_node={nproc}", *args], capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_a_loop_and_a_chain_finish_and_evaluation_is_sharded(reviews, tmp_path):
    # An odd-sized raw file (59 lines) for x-eval / x-pred; dev (60) in batches of 7 during training:
    # 9 batches, so the ranks get 5 and 4 batches and the last batch is short.
    odd = tmp_path / "dev59.txt"
    odd.write_text("".join((REPO / "examples/data/sample/reviews/dev.txt").read_text().splitlines(True)[:59]))
    common = {"dropout": 0.0, "max_epoch": 1, "eval_interval": 5, "warmup_steps": 0, "batch_size": 8,
              "valid_batch_size": 7, "viz": False, "overwrite": True}
    runs = []
    for name, lr in (("run1", 3e-3), ("run2", 2e-3)):
        path = write_config(tmp_path / f"{name}.hjson", reviews, tmp_path / name, **common, learning_rate=lr)
        runs.append(json.loads(path.read_text()))
        (tmp_path / name).mkdir()  # an earlier run of x-train (its marker) that overwrite: true replaces
        (tmp_path / name / ".xdpx-run").write_text("")
        (tmp_path / name / "train.log.tsv").write_text("replaced by overwrite: true\n")
    (tmp_path / "loop.hjson").write_text(json.dumps(runs))
    (tmp_path / "eval.hjson").write_text(json.dumps({
        "save_dir": str(tmp_path / "run2"), "valid_subset": [str(odd), "dev"], "batch_size": 6, "cuda": False,
        "save_to_file": str(tmp_path / "eval.tsv"), "save_mode": "w"}))
    (tmp_path / "pred.hjson").write_text(json.dumps({
        "save_dir": str(tmp_path / "run2"), "batch_size": 6, "cuda": False,
        "predict_file_map": {str(odd): str(tmp_path / "pred.tsv")}}))

    result = torchrun(str(CHAIN_RUNNER), "x-train", str(tmp_path / "loop.hjson"),
                      "x-eval", str(tmp_path / "eval.hjson"), "x-pred", str(tmp_path / "pred.hjson"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("done: 15 updates") == 2, result.stdout  # rank 0's log: both runs of the loop
    assert "replaced by overwrite" not in (tmp_path / "run1" / "train.log.tsv").read_text()

    # the same checkpoints scored by one process
    (tmp_path / "eval.hjson").write_text((tmp_path / "eval.hjson").read_text().replace("eval.tsv", "eval1.tsv"))
    (tmp_path / "pred.hjson").write_text((tmp_path / "pred.hjson").read_text().replace("pred.tsv", "pred1.tsv"))
    assert run_chain(["x-eval", str(tmp_path / "eval.hjson"), "x-pred", str(tmp_path / "pred.hjson")]) == 0
    assert (tmp_path / "eval.tsv").read_text() == (tmp_path / "eval1.tsv").read_text()
    assert "\t59\t" in (tmp_path / "eval.tsv").read_text()  # every sample once: no padding, no duplicate
    assert (tmp_path / "pred.tsv").read_bytes() == (tmp_path / "pred1.tsv").read_bytes()
    assert len((tmp_path / "pred.tsv").read_text().splitlines()) == 60  # header + 59

    # training-time evaluation (sharded) gave exactly what one process gives for the final weights
    last = (tmp_path / "run2" / "valid.log.tsv").read_text().splitlines()
    header, final = last[0].split("\t"), dict(zip(last[0].split("\t"), last[-1].split("\t")))
    (tmp_path / "eval_last.hjson").write_text(json.dumps({
        "save_dir": str(tmp_path / "run2"), "checkpoint": str(tmp_path / "run2" / "<last>"), "valid_subset": "dev",
        "batch_size": 7, "cuda": False, "save_to_file": str(tmp_path / "last.tsv"), "save_mode": "w"}))
    assert run_chain(["x-eval", str(tmp_path / "eval_last.hjson")]) == 0
    lines = (tmp_path / "last.tsv").read_text().splitlines()
    one = dict(zip(lines[0].split("\t"), lines[1].split("\t")))
    assert "accuracy" in header
    for key in ("loss", "accuracy", "auc", "macro_f1"):
        assert final[key] == one[key], key


def test_x_train_starts_its_processes_and_auto_ga_switches_every_rank_together(reviews, tmp_path, capfd,
                                                                              one_process_weights):
    # distributed_world_size: 2 on the CPU: x-train starts 2 processes itself (torch's elastic launcher).
    # Only rank 1 runs out of memory (batches > 4): both go to 4 x 2 and the update keeps its 16 samples.
    from train_helpers import FAULTY, train

    common = COMMON
    faulty = {"distributed_world_size": 2, "user_dir": str(FAULTY), "model": "faulty_cnn", "oom_above_batch": 4,
              "oom_rank": 1}
    # without auto_ga rank 1 dies: the launch says which rank failed and how to go on
    assert train(write_config(tmp_path / "ddp.hjson", reviews, tmp_path / "ddp", **common, batch_size=8,
                              **faulty)) == 1
    err = capfd.readouterr().err
    assert "x-train with 2 processes failed: rank 1 exited with code 1" in err and "resume: true" in err, err[-3000:]
    launched = write_config(tmp_path / "ddp.hjson", reviews, tmp_path / "ddp", **common, batch_size=8, **faulty,
                            auto_ga=True, resume=True)
    assert train(launched) == 0
    log = (tmp_path / "ddp" / "log.txt").read_text()
    assert log.count("auto_ga: out of memory at update 1: batch_size -> 4, update_freq -> 2") == 1, log
    assert "out of memory on 1 of 2 processes" not in log  # the message is rank 0's own log line above
    rows = (tmp_path / "ddp" / "train.log.tsv").read_text().splitlines()
    assert rows[1].split("\t")[rows[0].split("\t").index("batch_size")] == "4"
    assert_weights_equal(tmp_path / "ddp", one_process_weights)


def test_two_nodes_with_c10d_rendezvous_equal_one_process_with_the_doubled_batch(reviews, tmp_path,
                                                                                   one_process_weights):
    # two torchrun launches (two "nodes" of one process each) meet at a c10d rendezvous on 127.0.0.1
    config = write_config(tmp_path / "nodes.hjson", reviews, tmp_path / "nodes", **COMMON, batch_size=8)
    endpoint = f"127.0.0.1:{free_port()}"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(REPO), str(HERE), os.environ.get("PYTHONPATH", "")])}
    nodes = [subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nnodes=2", f"--node_rank={rank}",
                               "--nproc_per_node=1", "--rdzv_backend=c10d", f"--rdzv_endpoint={endpoint}",
                               "--rdzv_id=two-nodes", str(CHAIN_RUNNER), "x-train", str(config)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
             for rank in (0, 1)]
    outputs = [node.communicate(timeout=150)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outputs[0][-2000:] + outputs[1][-2000:]
    assert "done: 15 updates, 240 samples" in outputs[0]
    assert_weights_equal(tmp_path / "nodes", one_process_weights)


def test_bmuf_with_block_momentum_0_and_block_lr_1_is_model_averaging_and_filters_with_momentum():
    result = torchrun(str(HERE / "bmuf_runner.py"), "0,1,0", "0.5,0.7,1")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert result.stdout.count("largest difference") == 4
