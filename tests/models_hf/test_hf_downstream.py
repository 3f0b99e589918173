"""The transformers family beyond one architecture's basics: tokenization equal to the checkpoint's own
tokenizer, Hub names from the local cache, SIGKILL + resume, FreeLB, gradient checkpointing, bf16 with
update_freq, pair regression, export_hf round trips and x-pred."""

from __future__ import annotations

import csv
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hf_builders import SAMPLES
from test_hf_architectures import TRAIN, final_weights, read_tsv, train, write

from tests.models_hf.conftest import prepro
from xdpx.cli import run_chain, x_script

KILL_RUNNER = Path(__file__).resolve().parents[1] / "train" / "kill_runner.py"
TEXTS = ["the filmmakers skillfully evoke the sense of menace that nature holds for many urban dwellers and "
         "the film never lets go of it for a single minute of its long running time .", "flat ."]


pytestmark = pytest.mark.usefixtures("one_thread")


def make_processor(data_dir: Path, name: str) -> Any:
    from xdpx.config.options import Args
    from xdpx.data import processors
    from xdpx.data.meta import read_meta

    values = {**read_meta(str(data_dir)), "data_dir": str(data_dir), "seed": 1, "processor": name}
    return processors.get(name)(Args(values, {}, set(), {}))


@pytest.mark.parametrize("architecture", ["bert", "roberta", "xlm-roberta", "deberta-v2", "modernbert"])
def test_samples_equal_the_checkpoint_tokenizer_with_special_tokens_pairs_and_truncation(architecture, hf_models,
                                                                                        hf_polarity):
    from transformers import AutoTokenizer

    reference = AutoTokenizer.from_pretrained(str(hf_models[architecture]))
    single, pair = make_processor(hf_polarity[architecture], "hf_single"), make_processor(hf_polarity[architecture],
                                                                                        "hf_pair")
    for text in TEXTS:  # the first is cut to max_len (40), the second is not
        want = reference(text, truncation=True, max_length=40)
        got = single.encode(text)
        assert got["input_ids"].tolist() == want["input_ids"]
    a, b = TEXTS
    want = reference(a, b, truncation="longest_first", max_length=40)
    got = pair.encode([a, b])
    assert got["input_ids"].tolist() == want["input_ids"] and len(want["input_ids"]) == 40
    if "token_type_ids" in want:
        assert got["token_type_ids"].tolist() == want["token_type_ids"]
    specials = {"roberta": ("<s>", "</s>"), "xlm-roberta": ("<s>", "</s>")}.get(architecture, ("[CLS]", "[SEP]"))
    tokens = single.dictionary.string(got["input_ids"])
    assert tokens[0] == specials[0] and tokens.count(specials[1]) == (3 if "roberta" in architecture else 2)


def hub_cache(root: Path, name: str, folder: Path) -> Path:
    """The layout `hf download` leaves in HF_HUB_CACHE: models--owner--name/{refs/main, snapshots/<rev>/}."""
    repo = root / f"models--{name.replace('/', '--')}"
    shutil.copytree(folder, repo / "snapshots" / "0123abcd")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    return repo / "snapshots" / "0123abcd"


def test_hub_name_resolves_from_the_local_cache_and_a_missing_one_says_what_to_do(hf_models, hf_polarity, tmp_path,
                                                                                  monkeypatch, capsys):
    import huggingface_hub

    from xdpx.models.checkpoints import CheckpointError
    from xdpx.models.hf_hub import local_pretrained

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    snapshot = hub_cache(tmp_path / "hub", "tiny-org/tiny-electra", hf_models["electra"])
    assert Path(local_pretrained("tiny-org/tiny-electra")) == snapshot
    save_dir = train(tmp_path, "run", hf_polarity["electra"], Path("tiny-org/tiny-electra"), max_update=2,
                     eval_interval=2)
    assert "loaded pretrained_model tiny-org/tiny-electra" in (save_dir / "log.txt").read_text()
    assert "Loading weights" not in capsys.readouterr().err  # transformers' own bar stays out of x-train's output
    assert "'model_type': 'electra'" in (save_dir / "args.py").read_text()

    with pytest.raises(CheckpointError, match=r"hf download tiny-org/absent\b.*point pretrained_model at"):
        local_pretrained("tiny-org/absent")
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(hf_polarity["electra"]), "save_dir": str(tmp_path / "x"),
              "pretrained_model": "tiny-org/absent", **TRAIN}
    capsys.readouterr()
    assert run_chain(["x-train", str(write(tmp_path / "absent.hjson", config)), "--dry"]) != 0
    err = capsys.readouterr().err
    assert "hf download tiny-org/absent" in err and "Traceback" not in err

    # x-prepro's tokenizer_dir: the same lookup (a Hub name in the cache works) and the same message
    data = prepro(tmp_path, "hub_data", data_source=str(SAMPLES / "polarity"), processor="hf_single", loader="single",
                  text_column=1, label_column=0, tokenizer_dir="tiny-org/tiny-electra", max_len=40)
    assert (data / "tokenizer.json").read_bytes() == (snapshot / "tokenizer.json").read_bytes()
    absent = tmp_path / "absent_prepro.hjson"
    absent.write_text(json.dumps({"data_dir": str(tmp_path / "absent_data"), "data_source": str(SAMPLES / "polarity"),
                                  "processor": "hf_single", "loader": "single", "text_column": 1, "label_column": 0,
                                  "tokenizer": "auto", "tokenizer_dir": "tiny-org/absent", "max_len": 40}))
    capsys.readouterr()
    assert run_chain(["x-prepro", str(absent), "--dry"]) == 2
    err = capsys.readouterr().err
    assert "key 'tokenizer_dir'" in err and "hf download tiny-org/absent" in err, err
    assert "point tokenizer_dir at the model's folder" in err and "Traceback" not in err
    assert not (tmp_path / "absent_data").exists()


def test_config_errors_name_the_fix(hf_models, hf_polarity, tmp_path, capsys):
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(hf_polarity["deberta-v2"]),
              "save_dir": str(tmp_path / "x"), "pretrained_model": str(hf_models["deberta-v2"]), **TRAIN,
              "pooling": "pooler"}
    assert run_chain(["x-train", str(write(tmp_path / "pooler.hjson", config)), "--dry"]) != 0
    assert "pooling: pooler: this architecture has no pooler" in capsys.readouterr().err
    config.update(pooling="cls", pretrained_model=str(tmp_path))  # a folder without config.json
    assert run_chain(["x-train", str(write(tmp_path / "nocfg.hjson", config)), "--dry"]) != 0
    assert "hf_config: no architecture" in capsys.readouterr().err


@pytest.mark.slow
def test_sigkill_then_resume_ends_bitwise_equal(hf_models, hf_polarity, tmp_path):
    reference = train(tmp_path, "reference", hf_polarity["roberta"], hf_models["roberta"])
    config = {"__parent__": "${data_dir}/meta", "data_dir": str(hf_polarity["roberta"]), "save_dir": str(tmp_path / "run"),
              "pretrained_model": str(hf_models["roberta"]), **TRAIN, "resume": True}
    path = write(tmp_path / "run.hjson", config)
    env = {**__import__("os").environ, "OMP_NUM_THREADS": "1"}

    def runner(where: str, n: int) -> int:
        return subprocess.run([sys.executable, str(KILL_RUNNER), str(path), where, str(n)], env=env, timeout=300,
                              capture_output=True, text=True).returncode

    assert runner("update", 13) == -signal.SIGKILL
    assert runner("never", 0) == 0
    want, got = final_weights(reference), final_weights(tmp_path / "run")
    for key in want:
        assert torch.equal(want[key], got[key]), key
    assert (tmp_path / "run" / "valid.log.tsv").read_text() == (reference / "valid.log.tsv").read_text()
    assert "resumed from state.pt: epoch 1, update 10" in (tmp_path / "run" / "log.txt").read_text()


@pytest.mark.slow
def test_freelb_gradient_checkpointing_and_bf16_with_update_freq(hf_models, hf_polarity, tmp_path):
    data, model = hf_polarity["roberta"], hf_models["roberta"]
    short = {"max_update": 4, "eval_interval": 4}
    plain = final_weights(train(tmp_path, "plain", data, model, **short))
    # transformers' own checkpointing recomputes each layer with the same dropout masks: the same update
    checkpointed = final_weights(train(tmp_path, "checkpointed", data, model, gradient_checkpointing=True, **short))
    for key in plain:
        assert torch.equal(plain[key], checkpointed[key]), key
    # FreeLB perturbs the word embeddings (inputs_embeds): other updates than without, still finite
    freelb_run = train(tmp_path, "freelb", data, model, task="freelb", adv_steps=2, adv_lr=0.5, rand_init_mag=0.1,
                       **short)
    freelb = final_weights(freelb_run)
    assert any(not torch.equal(plain[k], freelb[k]) for k in plain)
    assert all(torch.isfinite(v).all() for v in freelb.values())
    assert np.isfinite(float(read_tsv(freelb_run / "valid.log.tsv")[-1]["loss"]))
    # bf16 autocast on the CPU with gradient accumulation
    bf16_run = train(tmp_path, "bf16", data, model, bf16=True, batch_size=8, update_freq=2, **short)
    assert np.isfinite(float(read_tsv(bf16_run / "valid.log.tsv")[-1]["loss"]))
    bf16 = final_weights(bf16_run)
    assert all(v.dtype == torch.float32 for v in bf16.values())  # autocast: the weights stay fp32


def assert_same_outputs(save_dir: Path, exported: Any) -> None:
    """``exported(net_input)`` equals the run's model on real batches of two shapes."""
    from xdpx.export.loading import load_run
    from xdpx.export.parity import real_samples

    run = load_run(str(save_dir))
    samples = real_samples(run.args, 40)
    for chosen in (samples[-5:], samples[12:14]):
        batch = run.processor.collate(chosen)["net_input"]
        with torch.no_grad():
            expected, actual = run.model(**batch), exported(batch)
        assert actual.shape == expected.shape
        torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-4)


@pytest.mark.slow
def test_pair_regression_export_hf_round_trips_and_x_pred(hf_models, hf_polarity, tmp_path):
    # STS-B pairs as regression on BERT (token types 0/1) with its pooler: transformers' own
    # BertForSequenceClassification gives the run's outputs
    stsb = prepro(tmp_path, "stsb", data_source=str(SAMPLES / "stsb"), processor="hf_pair", loader="pair",
                  data_files={"train.tsv": "train", "dev.tsv": "dev"},
                  text1_column=5, text2_column=6, label_column=4, extra_columns=True, target_type="regression",
                  tokenizer_dir=str(hf_models["bert"]), max_len=48)
    pair_run = train(tmp_path, "pair", stsb, hf_models["bert"], model="hf_pair", loss="mse", major_metric="pearson",
                     max_update=6, eval_interval=6)
    assert "'pooling': 'pooler'" in (pair_run / "args.py").read_text()
    out = tmp_path / "hf_pair"
    assert x_script(["export_hf", str(write(tmp_path / "hf1.hjson", {"save_dir": str(pair_run), "out_dir": str(out)}))]) == 0
    info = json.loads((out / "export.json").read_text())
    assert info["architecture"] == "AutoModelForSequenceClassification" and float(info["parity"].split()[2]) <= 1e-5
    assert json.loads((out / "config.json").read_text())["problem_type"] == "regression"
    from transformers import AutoModel, AutoModelForSequenceClassification

    # the folder as a user loads it, against the run's model on real batches (not the tool's own number)
    hf = AutoModelForSequenceClassification.from_pretrained(str(out)).eval()
    assert type(hf).__name__ == "BertForSequenceClassification"
    assert_same_outputs(pair_run, lambda batch: hf(**batch).logits.squeeze(-1))

    # RoBERTa with cls pooling: the encoder by save_pretrained, the head beside it
    run = train(tmp_path, "roberta", hf_polarity["roberta"], hf_models["roberta"], max_update=6, eval_interval=6)
    out = tmp_path / "hf_roberta"
    assert x_script(["export_hf", str(write(tmp_path / "hf2.hjson", {"save_dir": str(run), "out_dir": str(out)}))]) == 0
    info = json.loads((out / "export.json").read_text())
    assert info["architecture"] == "AutoModel+head" and float(info["parity"].split()[2]) <= 1e-5
    # AutoModel and the head beside it: cls pooling is the first token's last hidden state
    from safetensors.torch import load_file

    encoder = AutoModel.from_pretrained(str(out)).eval()
    head = load_file(str(out / "head.safetensors"))
    assert json.loads((out / "head.json").read_text())["pooling"] == "cls"
    assert_same_outputs(run, lambda batch: torch.nn.functional.linear(
        encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state[:, 0],
        head["classifier.weight"], head["classifier.bias"]))
    from transformers import AutoTokenizer

    assert AutoTokenizer.from_pretrained(str(out))("flat .")["input_ids"] == \
        make_processor(hf_polarity["roberta"], "hf_single").encode("flat .")["input_ids"].tolist()

    # x-pred: a class per line, the probabilities of the eager model's logits
    predictions = tmp_path / "pred.tsv"
    config = {"save_dir": str(run), "predict_file_map": {str(SAMPLES / "polarity" / "test.txt"): str(predictions)}}
    assert run_chain(["x-pred", str(write(tmp_path / "pred.hjson", config))]) == 0
    with open(predictions, encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(rows) == 60 and {r["predict"] for r in rows} <= {"1", "-1"}
    from xdpx.export.loading import load_run

    loaded = load_run(str(run))
    texts = [line.split("\t", 1)[1] for line in (SAMPLES / "polarity" / "test.txt").read_text().splitlines()[:8]]
    batch = loaded.processor.collate([dict(loaded.processor.encode(t), id=i) for i, t in enumerate(texts)])
    with torch.no_grad():
        probs = torch.softmax(loaded.model(**batch["net_input"]), -1).max(-1).values.numpy()
    np.testing.assert_allclose([float(r["prob"]) for r in rows[:8]], probs, atol=1e-5)
