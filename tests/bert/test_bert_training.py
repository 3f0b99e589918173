"""x-train on every BERT model with a tiny random BERT over the committed samples; MLM masks, FreeLB,
bf16 on the CPU."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.bert.conftest import TINY_BERT
from xdpx.cli import run_chain

COMMON = {**TINY_BERT, "batch_size": 16, "learning_rate": 1e-3, "max_update": 6, "log_interval": 3,
          "hidden_dropout_prob": 0.1, "seed": 3}


def train(tmp_path: Path, data_dir: Path, name: str = "run", **config: Any) -> Path:
    save_dir = tmp_path / name
    path = tmp_path / f"{name}.hjson"
    path.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(data_dir),
                                "save_dir": str(save_dir), **COMMON, **config}))
    assert run_chain(["x-train", str(path)]) == 0
    return save_dir


def last_eval(save_dir: Path) -> dict[str, str]:
    with open(save_dir / "valid.log.tsv") as f:
        return list(csv.DictReader(f, delimiter="\t"))[-1]


def weights(save_dir: Path) -> dict[str, torch.Tensor]:
    from xdpx.models.checkpoints import load_torch

    return load_torch(str(save_dir / "state.pt"))["model"]


@pytest.mark.parametrize(("model", "data", "config", "metric"), [
    ("bert_classification", "reviews_bert", {"loss": "cross_entropy", "pooling": "mean", "valid_subset": "train", "learning_rate": 2e-3}, "accuracy"),
    ("bert_pair", "stsb_bert", {"loss": "mse"}, "pearson"),
    ("bert_siamese", "stsb_bert", {"loss": "mse", "bf16": True}, "spearman"),  # bf16 autocast on the CPU
    ("bert_lm", "daily_lm", {"loss": "mlm"}, "mlm_accuracy"),
    ("bert_pretrain", "daily_pretrain", {"loss": "mlm_sop"}, "sop_accuracy"),
])
def test_every_bert_model_trains_with_x_train(request, tmp_path, model, data, config, metric):
    save_dir = train(tmp_path, request.getfixturevalue(data), model=model, major_metric=metric, eval_interval=1,
                     **config)
    row = last_eval(save_dir)
    assert row["step"] == "6" and 0.0 <= abs(float(row[metric])) <= 1.0
    with open(save_dir / "valid.log.tsv") as f:
        losses = [float(r["loss"]) for r in csv.DictReader(f, delimiter="\t")]
    # the model learns: the evaluated loss (same set, no dropout: without updates it would repeat exactly) falls
    # by 0.5% or more and ends below the first evaluation (6 updates: reviews, scored on its train split at lr
    # 2e-3, 0.6910 -> 0.6849 -> 0.6856; its 60 dev reviews did not move reliably in 6 updates of a random tiny
    # BERT; MLM 9.947 -> 9.858 steadily)
    assert len(losses) == 6 and min(losses[1:]) < 0.995 * losses[0] and losses[-1] < losses[0], losses
    if model in ("bert_lm", "bert_pretrain"):
        assert float(row["mlm_perplexity"]) > 1.0 and 0.0 <= float(row["mlm_accuracy"]) <= 1.0
    from xdpx.config.writers import read_args

    saved = read_args(str(save_dir / "args.py"))
    assert saved["hidden_size"] == 32 and saved["pretrained_model"] is None


def test_fine_tune_from_an_mlm_run_keeps_the_encoder(tmp_path, daily_lm, reviews_bert):
    """bert_lm run -> bert_classification from ${save_dir}/<best>: architecture and encoder carried over."""
    lm = train(tmp_path, daily_lm, "lm", model="bert_lm", loss="mlm", major_metric="mlm_accuracy",
               hidden_size=48, num_attention_heads=4)
    sizes = {k: v for k, v in COMMON.items() if k != "hidden_size"}
    path = tmp_path / "ft.hjson"
    path.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(reviews_bert),
                                "save_dir": str(tmp_path / "ft"), **sizes, "pretrained_model": f"{lm}/<best>",
                                "model": "bert_classification", "loss": "cross_entropy", "major_metric": "accuracy",
                                "max_update": 1, "learning_rate": 1e-9}))
    assert run_chain(["x-train", str(path)]) == 0
    log = (tmp_path / "ft/log.txt").read_text()
    assert "missing keys (left at their initial values): ['bert.pooler.dense.weight', 'bert.pooler.dense.bias', " \
           "'classifier.weight', 'classifier.bias']" in log
    assert "unexpected keys (ignored): ['cls.predictions" in log
    before, after = weights(lm), weights(tmp_path / "ft")
    assert after["bert.embeddings.word_embeddings.weight"].shape[1] == 48  # hidden_size from the lm run
    torch.testing.assert_close(after["bert.encoder.layer.1.output.dense.weight"],
                               before["bert.encoder.layer.1.output.dense.weight"], atol=1e-6, rtol=0)


def make_processor(data_dir: Path, name: str, **extra: Any) -> Any:
    from xdpx.config.options import Args
    from xdpx.data import processors
    from xdpx.data.meta import read_meta

    values = {**read_meta(str(data_dir)), "data_dir": str(data_dir), "seed": 1, **extra}
    return processors.get(name)(Args(values, {}, set(), {}))


def test_mlm_masks_and_sentence_order_depend_on_seed_epoch_and_id(daily_pretrain):
    from xdpx.data.dataset import open_split

    processor = make_processor(daily_pretrain, "bert_pretrain")
    data = open_split(str(daily_pretrain), "train")
    samples = [data[i] for i in range(6)]
    first = processor.collate(samples)
    again = processor.collate(list(reversed(samples)))
    for key in ("input_ids", "token_type_ids"):
        assert torch.equal(first["net_input"][key], again["net_input"][key].flip(0))
    assert torch.equal(first["target"], again["target"].flip(0))
    assert set(first["target"][:, 0].tolist()) == {0, 1}  # the sentence-order labels (kept / swapped)
    types = first["net_input"]["token_type_ids"]
    assert (types[:, 0] == 0).all() and (types.max(1).values == 1).all()  # two segments in every block
    masked = first["target"][:, 1:] != -100
    assert masked.any(1).all() and (first["net_input"]["input_ids"][:, 1:][masked] != processor.sep_index).all()
    processor.set_epoch(2)
    later = processor.collate(samples)
    assert not torch.equal(later["net_input"]["input_ids"], first["net_input"]["input_ids"])


def test_mixed_precision_pads_to_a_multiple_of_8_on_a_gpu_only(reviews_bert, monkeypatch):
    import torch

    from xdpx.data.dataset import open_split

    data = open_split(str(reviews_bert), "train")
    odd = [i for i in range(len(data)) if data.sizes[i] % 8][:3]  # a longest sample not a multiple of 8
    samples = [data[i] for i in odd]
    plain = make_processor(reviews_bert, "bert_single").collate(samples)
    width = plain["net_input"]["input_ids"].size(1)
    assert width % 8
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    on_cpu = make_processor(reviews_bert, "bert_single", bf16=True).collate(samples)
    assert torch.equal(on_cpu["net_input"]["input_ids"], plain["net_input"]["input_ids"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # only the padding rule is asked
    mixed = make_processor(reviews_bert, "bert_single", bf16=True).collate(samples)
    assert mixed["net_input"]["input_ids"].size(1) == -(-width // 8) * 8
    assert mixed["net_input"]["attention_mask"].sum() == plain["net_input"]["attention_mask"].sum()
    forced_cpu = make_processor(reviews_bert, "bert_single", bf16=True, cpu=True).collate(samples)
    assert forced_cpu["net_input"]["input_ids"].size(1) == width


def test_whole_word_masking_with_jieba(tmp_path):
    pytest.importorskip("jieba")
    from tests.bert.conftest import VOCAB
    from xdpx.config.options import Args
    from xdpx.data import processors

    (tmp_path / "vocab.txt").write_text(Path(VOCAB).read_text())
    values = dict(processor="bert_lm", tokenizer="bert", max_len=64, min_len=1, pad_word="[PAD]", unk_word="[UNK]",
                  lower=True, cls_word="[CLS]", sep_word="[SEP]", data_dir=str(tmp_path), seed=1, mask_word="[MASK]",
                  mask_prob=0.5, random_token_prob=0.0, leave_unmasked_prob=0.0, mask_whole_words=True,
                  word_segmenter="jieba")
    processor = processors.get("bert_lm")(Args(values, {}, set(), {}))
    text = "中华人民共和国成立了，人民代表大会召开会议"
    ids = processor.encode(text)["input_ids"]
    import jieba

    words = jieba.lcut(text, HMM=False)
    assert sum(map(len, words)) == len(ids) - 2 and max(map(len, words)) >= 4  # one id per character here
    masked_words = 0
    for sample_id in range(200):
        masked, target = processor.mask(ids, sample_id)
        flags = (masked == processor.mask_index)[1:-1].tolist()
        start, here = 0, 0
        for word in words:  # every word is masked entirely or not at all
            assert len(set(flags[start: start + len(word)])) == 1, (word, flags)
            here += flags[start]
            start += len(word)
        # mask_prob of the words, rounded at random: 0.5 x len(words) down or up
        assert here in (len(words) // 2, -(-len(words) // 2)), (sample_id, here, len(words))
        masked_words += here
        chosen = target[1:-1] != -100  # the target keeps the original ids of exactly the masked positions
        assert chosen.tolist() == flags and (target[1:-1][chosen] == ids[1:-1][chosen]).all()
    assert abs(masked_words / (200 * len(words)) - 0.5) < 0.03


def test_every_evaluation_sees_the_weights_of_its_update(tmp_path, stsb_bert):
    # x-train's default fused AdamW changes the weights without bumping their version; the query/key/value
    # projection kept by one evaluation made the later evaluations score stale attention weights (real
    # STS-B: Pearson 0.73 logged against 0.82). The last row of valid.log.tsv must equal x-eval of the last
    # checkpoint in a fresh model.
    save_dir = train(tmp_path, stsb_bert, model="bert_pair", loss="mse", major_metric="pearson",
                     eval_interval=2, learning_rate=3e-3)
    with open(save_dir / "valid.log.tsv") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [r["step"] for r in rows] == ["2", "4", "6"]
    out = tmp_path / "scores.tsv"
    config = tmp_path / "eval.hjson"
    config.write_text(json.dumps({"save_dir": str(save_dir), "valid_subset": "dev",
                                  "checkpoint": f"{save_dir}/<last>", "save_to_file": str(out)}))
    assert run_chain(["x-eval", str(config)]) == 0
    with open(out) as f:
        [scored] = list(csv.DictReader(f, delimiter="\t"))
    assert scored["checkpoint"].endswith("checkpoint-6.pt")
    assert (scored["loss"], scored["pearson"]) == (rows[-1]["loss"], rows[-1]["pearson"])
