"""LoRA through peft on our BERT: what trains, the share in log.txt, exact resume after kill -9, x-eval ==
valid.log.tsv, merge_lora's parity and x-pred on the merged run; freeze_layers and layer_lr_decay."""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.lora.conftest import COMMON, train
from xdpx.cli import run_chain, x_script
from xdpx.errors import EXIT_CONFIG
from xdpx.models.checkpoints import load_torch, resolve_checkpoint

pytest.importorskip("peft")

REPO = Path(__file__).resolve().parents[2]
KILL_RUNNER = REPO / "tests/train/kill_runner.py"
TEST_TXT = REPO / "examples/data/sample/reviews/test.txt"
# adapters with dropout, hidden dropout, a save at update 3 and 6, a higher lr as LoRA wants
LORA = {"lora": {"r": 4, "alpha": 8, "dropout": 0.1}, "learning_rate": 5e-3, "max_update": 8,
        "hidden_dropout_prob": 0.1}


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def lora_config(pretrained: Path) -> dict[str, object]:
    return {**LORA, "pretrained_model": str(pretrained), "resume": True}


@pytest.fixture(scope="module")
def lora_run(reviews: Path, pretrained: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return train(tmp_path_factory.mktemp("lora_run"), reviews, "run", **lora_config(pretrained))


def test_only_the_adapters_and_the_head_train(lora_run: Path, pretrained: Path) -> None:
    base = load_torch(resolve_checkpoint(str(pretrained)))
    final = load_torch(str(lora_run / "state.pt"))["model"]
    adapters = [k for k in final if ".lora_" in k]
    # query and value of both layers, A and B each
    assert len(adapters) == 8 and all(".attention.self.query." in k or ".attention.self.value." in k for k in adapters)
    for key, value in final.items():
        plain = key.replace(".base_layer.", ".")
        if ".lora_" in key:
            continue
        if key.startswith("classifier."):
            assert not torch.equal(value, base[plain]), f"the head {key} did not train"
        else:  # the pretrained encoder, wrapped Linears included, is bit for bit what was loaded
            assert torch.equal(value, base[plain]), f"{key} changed"
    assert all(final[k].abs().sum() > 0 for k in adapters if ".lora_B." in k)  # B starts at zero
    trainable = sum(final[k].numel() for k in [*adapters, "classifier.weight", "classifier.bias"])
    total = sum(v.numel() for v in final.values())
    line = next(line for line in (lora_run / "log.txt").read_text().splitlines() if "lora: r=4" in line)
    assert f"{trainable:,} of {total:,} parameters trainable ({100 * trainable / total:.2f}%" in line
    assert trainable / total < 0.02


def test_kill_9_then_resume_equals_the_uninterrupted_run(lora_run: Path, reviews: Path, pretrained: Path,
                                                         tmp_path: Path) -> None:
    save_dir = tmp_path / "run"
    config = tmp_path / "run.hjson"
    config.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(reviews),
                                  "save_dir": str(save_dir), **COMMON, **lora_config(pretrained)}))
    # the same thread count as this process, which runs the reference and the resumed part (bitwise on CPU)
    env = {**os.environ, "OMP_NUM_THREADS": str(torch.get_num_threads()),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    killed = subprocess.run([sys.executable, str(KILL_RUNNER), str(config), "update", "5"], env=env,
                            capture_output=True, text=True, timeout=300)
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    assert load_torch(str(save_dir / "state.pt"))["counters"]["num_updates"] == 3
    assert run_chain(["x-train", str(config)]) == 0
    resumed, reference = (load_torch(str(d / "state.pt")) for d in (save_dir, lora_run))
    assert resumed["model"].keys() == reference["model"].keys()
    for key, value in reference["model"].items():
        assert torch.equal(resumed["model"][key], value), key
    assert (save_dir / "valid.log.tsv").read_text() == (lora_run / "valid.log.tsv").read_text()


def test_x_eval_of_a_lora_run_equals_its_valid_log(lora_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.tsv"
    config = tmp_path / "eval.hjson"
    config.write_text(json.dumps({"save_dir": str(lora_run), "checkpoint": f"{lora_run}/<last>",
                                  "valid_subset": "dev", "save_to_file": str(out)}))
    assert run_chain(["x-eval", str(config)]) == 0
    [row] = read_tsv(out)
    last = read_tsv(lora_run / "valid.log.tsv")[-1]
    assert [row[c] for c in ("loss", "accuracy", "auc")] == [last[c] for c in ("loss", "accuracy", "auc")]


def x_pred(tmp_path: Path, save_dir: Path, out: Path) -> list[dict[str, str]]:
    config = tmp_path / f"pred-{out.stem}.hjson"
    config.write_text(json.dumps({"save_dir": str(save_dir), "predict_file_map": {str(TEST_TXT): str(out)}},
                                 ensure_ascii=False))
    assert run_chain(["x-pred", str(config)]) == 0
    return read_tsv(out)


def test_merge_lora_writes_a_plain_run_that_predicts_as_the_adapters(lora_run: Path, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    merged = tmp_path / "merged"
    assert x_script(["merge_lora", str(lora_run), "--out", str(merged)]) == 0
    captured = capsys.readouterr()
    report = captured.out
    # each phase says when it starts (a base-sized merge takes minutes on a CPU), on stderr
    phases = [line.split(": ", 1)[1] for line in captured.err.splitlines() if line.startswith("x-script merge_lora [")]
    assert [p.split(" ")[0] for p in phases] == ["loading", "merging", "checking", "writing"], captured.err
    difference = float(re.search(r"max \|difference\| (\S+)", report).group(1))
    assert difference <= 1e-5
    from xdpx.config.writers import read_args

    assert read_args(str(merged / "args.py"))["lora"] is None
    weights = load_torch(resolve_checkpoint(str(merged / "<best>")))
    best = load_torch(resolve_checkpoint(str(lora_run / "<best>")))
    assert not any("lora_" in k or "base_layer" in k for k in weights)
    # W + B A x alpha / r, computed here without peft
    prefix = "bert.encoder.layer.1.attention.self.value"
    folded = best[f"{prefix}.base_layer.weight"] + \
        best[f"{prefix}.lora_B.default.weight"] @ best[f"{prefix}.lora_A.default.weight"] * (8 / 4)
    assert not torch.equal(folded, best[f"{prefix}.base_layer.weight"])
    torch.testing.assert_close(weights[f"{prefix}.weight"], folded, atol=1e-6, rtol=0)

    plain, adapted = x_pred(tmp_path, merged, tmp_path / "merged.tsv"), x_pred(tmp_path, lora_run, tmp_path / "lora.tsv")
    assert len(plain) == len(adapted) == 60
    assert [r["predict"] for r in plain] == [r["predict"] for r in adapted]
    for a, b in zip(plain, adapted):
        assert abs(float(a["prob"]) - float(b["prob"])) <= 1e-5
    # a run without adapters has nothing to merge
    assert x_script(["merge_lora", str(merged), "--out", str(tmp_path / "again")]) == 1
    assert "trained without lora" in capsys.readouterr().err
    assert not (tmp_path / "again").exists()


def test_freeze_layers_keeps_the_embeddings_and_bottom_layers_bitwise(reviews: Path, pretrained: Path,
                                                                      tmp_path: Path) -> None:
    run = train(tmp_path, reviews, "frozen", pretrained_model=str(pretrained), freeze_layers=1, max_update=3,
                eval_interval=3)
    base = load_torch(resolve_checkpoint(str(pretrained)))
    final = load_torch(str(run / "state.pt"))["model"]
    for key, value in final.items():
        bottom = key.startswith(("bert.embeddings.", "bert.encoder.layer.0."))
        assert torch.equal(value, base[key]) == bottom, key


def test_lora_options_are_checked_before_any_work(reviews: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.hjson"
    config.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(reviews),
                                  "save_dir": str(tmp_path / "run"), **COMMON,
                                  "lora": {"rank": 8}, "freeze_layers": -1}))
    assert run_chain(["x-train", str(config)]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert f"{config}: key 'lora': {{'rank': 8}}: must be a dict of r (whole number >= 1" in err
    assert f"{config}: key 'freeze_layers': -1: must be" in err
    assert not (tmp_path / "run").exists()


def test_an_empty_lora_dict_takes_the_defaults(reviews: Path, pretrained: Path, tmp_path: Path) -> None:
    # `lora: {}` is documented as "the defaults": it must wrap (an empty dict is falsy; a truthiness test
    # once left LoRA silently off), and merge_lora must accept the run
    run = train(tmp_path, reviews, "run", lora={}, learning_rate=5e-3, max_update=2,
                pretrained_model=str(pretrained))
    state = load_torch(str(run / "state.pt"))["model"]
    assert any(".lora_A." in k for k in state)
    assert any("lora: r=8, alpha=16" in line for line in (run / "log.txt").read_text().splitlines())
    assert x_script(["merge_lora", str(run), "--out", str(tmp_path / "merged")]) == 0
    merged = load_torch(str(next((tmp_path / "merged").glob("checkpoint-*.pt"))))
    assert merged and not any(".lora_" in k for k in merged)
