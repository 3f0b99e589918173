"""FSDP (fsdp: true) and preemption with two processes: real torchrun processes on gloo (CPU).

Every two-process run here is one x-train chain in ONE torchrun launch (the process group stays for the
chain): starting two processes costs more than these small runs, and the test time budget is tight.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from train_helpers import FAULTY, assert_same_weights, final_weights, train, write_config

from xdpx.export.loading import load_run
from xdpx.models.checkpoints import load_torch

REPO = Path(__file__).resolve().parents[2]
# 240 samples, updates of 2 x 16 = 32: 8 updates; no dropout, so FSDP and DDP can be compared
COMMON = {"dropout": 0.0, "max_epoch": 1, "eval_interval": 5, "warmup_steps": 0}
PREEMPT = {"model": "faulty_cnn", "user_dir": str(FAULTY), "eval_interval": 3, "log_interval": 3}


@pytest.fixture(scope="module")
def launch(reviews: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    root = tmp_path_factory.mktemp("two_processes")
    configs = [
        write_config(root / "fsdp.hjson", reviews, root / "fsdp", **COMMON, fsdp=True),
        write_config(root / "ddp.hjson", reviews, root / "ddp", **COMMON),
        # paused after 4 updates; continued below on ONE process (update_freq 2 keeps the 32 samples)
        write_config(root / "hybrid.hjson", reviews, root / "hybrid", **COMMON, fsdp=True, fsdp_sharding="hybrid",
                     train_steps=4),
        # paused after 4 updates, then resumed by the next run of this launch on the same two processes: the
        # full state.pt is loaded into the shards (xdpx.train.fsdp.load_full_state)
        write_config(root / "paused.hjson", reviews, root / "resumed", **COMMON, fsdp=True, train_steps=4),
        write_config(root / "resume.hjson", reviews, root / "resumed", **COMMON, fsdp=True, resume=True),
        # last: rank 1 alone gets SIGUSR1 in the forward of update 5 (XDPX_TEST_SIGNAL, faulty_components)
        write_config(root / "preempt.hjson", reviews, root / "preempt", **{**COMMON, **PREEMPT}),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(REPO), "XDPX_TEST_SIGNAL": "SIGUSR1:train:5:1"}
    result = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone",
                             "-m", "xdpx", "x-train", *map(str, configs)],
                            capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    return root, result


def test_fsdp_trains_as_ddp_with_half_the_parameter_and_optimizer_memory_per_process(launch):
    root, result = launch
    assert (root / "ddp" / "state.pt").exists(), result.stderr[-3000:]
    fsdp, ddp = final_weights(root / "fsdp"), final_weights(root / "ddp")
    for key, value in fsdp.items():  # the saved weights are a plain, full state_dict
        assert type(value) is torch.Tensor and value.shape == ddp[key].shape
        assert torch.allclose(value, ddp[key], rtol=1e-5, atol=1e-7), key
    assert [r.split("\t")[:4] for r in (root / "fsdp" / "valid.log.tsv").read_text().splitlines()] == \
        [r.split("\t")[:4] for r in (root / "ddp" / "valid.log.tsv").read_text().splitlines()]
    # the optimizer state is saved as an unsharded optimizer writes it (index keys, full shapes)
    saved, plain = (load_torch(str(root / run / "state.pt"))["optimizer"] for run in ("fsdp", "ddp"))
    assert saved["param_groups"] == plain["param_groups"]
    for index, state in plain["state"].items():
        assert saved["state"][index]["exp_avg"].shape == state["exp_avg"].shape
    # what each process held (measured on the DTensor shards): half of what one unsharded process holds
    line = next(line for line in (root / "fsdp" / "log.txt").read_text().splitlines() if "elements per process" in line)
    shares = [float(share) for share in re.findall(r"= ([\d.]+)%", line)]
    assert len(shares) == 2 and all(45 <= share <= 55 for share in shares), line
    assert "fsdp:" not in (root / "ddp" / "log.txt").read_text()


def test_fsdp_run_resumes_on_one_process_and_loads_as_a_plain_run(launch, reviews):
    root, result = launch
    paused = root / "hybrid"
    assert load_torch(str(paused / "state.pt"))["counters"]["num_updates"] == 4, result.stderr[-3000:]
    assert "(hybrid; mesh (1, 2);" in (paused / "log.txt").read_text()
    config = write_config(root / "one.hjson", reviews, paused, **COMMON, fsdp=True, fsdp_sharding="hybrid",
                          update_freq=2, resume=True)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert train(config) == 0
    finally:
        torch.set_num_threads(threads)
    assert "fsdp: one process, so nothing is sharded" in (paused / "log.txt").read_text()
    assert "resumed from state.pt: epoch 1, update 4" in (paused / "log.txt").read_text()
    resumed, reference = final_weights(paused), final_weights(root / "fsdp")
    for key, value in resumed.items():
        assert torch.allclose(value, reference[key], rtol=1e-5, atol=1e-7), key
    # x-eval / x-pred / x-serve and the exports load an FSDP run's checkpoint strictly, as any other
    loaded = load_run(str(root / "fsdp"), str(root / "fsdp" / "checkpoint-8.pt"))
    assert_same_weights(loaded.model.state_dict(), load_torch(str(root / "fsdp" / "checkpoint-8.pt")))


def test_fsdp_run_paused_and_resumed_on_two_processes_equals_the_uninterrupted_run_bitwise(launch):
    root, result = launch
    log = (root / "resumed" / "log.txt").read_text()
    assert "paused at update 4" in log and "resumed from state.pt: epoch 1, update 4" in log, result.stderr[-3000:]
    assert log.count("elements per process") == 2  # sharded on two processes, before and after the pause
    assert_same_weights(final_weights(root / "resumed"), final_weights(root / "fsdp"))
    # the optimizer state the shards were loaded with went on as the uninterrupted run's (Adam's moments)
    resumed, uninterrupted = (load_torch(str(root / run / "state.pt"))["optimizer"] for run in ("resumed", "fsdp"))
    same_types = lambda groups: [{**g, "betas": tuple(g["betas"])} for g in groups]  # noqa: E731 (a list once loaded)
    assert same_types(resumed["param_groups"]) == same_types(uninterrupted["param_groups"])
    assert resumed["state"].keys() == uninterrupted["state"].keys()
    for index, state in uninterrupted["state"].items():
        for name, value in state.items():
            assert torch.equal(resumed["state"][index][name], value), (index, name)
    assert (root / "resumed" / "valid.log.tsv").read_text() == (root / "fsdp" / "valid.log.tsv").read_text()


def test_two_processes_stop_together_when_only_one_rank_gets_the_signal(launch):
    root, result = launch
    run = root / "preempt"
    # both ranks exit with EXIT_REQUEUE (3) after rank 0 saved the state; torchrun reports each rank
    exits = dict(re.findall(r"rank\s*: (\d+) \(local_rank.*\n\s*exitcode\s*: (-?\d+)", result.stderr))
    assert exits == {"0": "3", "1": "3"}, result.stderr[-3000:]
    counters = load_torch(str(run / "state.pt"))["counters"]
    # rank 0 never got the signal: it stopped after the same update as rank 1, and saved for both
    assert counters["num_updates"] == 5 and counters["preempted_by"] == "SIGUSR1" and not counters["finished"]
    lines = [line for line in (run / "log.txt").read_text().splitlines() if "preempted: SIG" in line]
    assert len(lines) == 1 and "stopped after update 5 " in lines[0]
    steps = [row.split("\t")[1] for row in (run / "valid.log.tsv").read_text().splitlines()[1:]]
    assert steps == ["3"]  # the evaluation of update 3, once; how the rerun continues: test_preemption.py
