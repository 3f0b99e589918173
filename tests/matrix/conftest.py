"""Fixtures of the encoder x head matrix: tiny data of the committed samples for every processor the matrix
uses (prepared once per session), a tiny random transformers BERT-architecture folder with a WordPiece
tokenizer trained on all the samples, and our BERT's vocabulary of the samples' characters."""

from __future__ import annotations

import collections
import json
from pathlib import Path

import pytest

from xdpx.cli import run_chain

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples/data/sample"
NER = REPO / "examples/ner/data"
RETRIEVAL = REPO / "examples/retrieval/data"


def sample_texts() -> list[str]:
    texts = []
    for path in [*(SAMPLES / "reviews").glob("*.txt"), *(SAMPLES / "peoples_daily").glob("*.txt")]:
        texts += [line.split("\t")[0] for line in path.read_text(encoding="utf-8").splitlines()]
    for path in [*(SAMPLES / "stsb").glob("*.tsv"), *RETRIEVAL.glob("*.tsv")]:
        for line in path.read_text(encoding="utf-8").splitlines():
            texts += [t for t in line.split("\t") if len(t) > 3]
    for path in NER.glob("*.conll"):
        texts.append("".join(line.split(" ")[0] for line in path.read_text(encoding="utf-8").splitlines() if line))
    return texts


def write_vocab(path: Path) -> Path:
    """Our BERT's vocabulary: the special tokens, the 300 most frequent characters, letters as pieces."""
    counts = collections.Counter(c for text in sample_texts() for c in text.lower() if not c.isspace())
    letters = [chr(c) for c in range(ord("a"), ord("z") + 1)]
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [c for c, _ in counts.most_common(300)]
    words += [c for c in letters if c not in words] + [f"##{c}" for c in letters]
    path.write_text("\n".join(words) + "\n", encoding="utf-8")
    return path


def build_hf_folder(folder: Path) -> Path:
    """A tiny random transformers BERT (hidden 16, 2 layers) with a WordPiece tokenizer of all samples."""
    import torch
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import AutoConfig, AutoModel, PreTrainedTokenizerFast

    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(sample_texts(), trainers.WordPieceTrainer(vocab_size=900, special_tokens=specials))
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tok.token_to_id("[CLS]")), ("[SEP]", tok.token_to_id("[SEP]"))])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                        cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    config = AutoConfig.for_model("bert", vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=2,
                                  num_attention_heads=2, intermediate_size=32, max_position_embeddings=128,
                                  pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def prepro(root: Path, name: str, config: dict) -> Path:
    path = root / f"{name}.json"
    path.write_text(json.dumps({"data_dir": str(root / name), "workers": 1, **config}, ensure_ascii=False))
    assert run_chain(["x-prepro", str(path)]) == 0
    return root / name


# what each head reads, by input shape: (loader / data, processor per tokenizer family)
SOURCES = {
    "single": {"data_source": str(SAMPLES / "reviews"), "loader": "single", "max_len": 40},
    "pair": {"data_source": str(SAMPLES / "stsb"), "data_files": "*.tsv", "loader": "pair", "text1_column": 5,
             "text2_column": 6, "label_column": 4, "extra_columns": True, "target_type": "regression", "max_len": 40},
    "tags": {"__parent__": str(REPO / "examples/ner/prepro_char"), "data_source": str(NER), "data_files": "*.conll",
             "max_len": 32},
    "texts": {"__parent__": str(REPO / "examples/retrieval/prepro_retrieval_bert"), "data_source": str(RETRIEVAL),
              "max_len": 24},
    "corpus": {"data_source": str(SAMPLES / "peoples_daily"), "loader": "corpus", "max_len": 32},
}
# the processor of each input shape, for word encoders (own vocabulary), our BERT, and transformers models
PROCESSORS = {
    "words": {"single": "single", "pair": "bi_encoder", "tags": "ner", "texts": "bi_encoder"},
    "bert": {"single": "bert_single", "pair": "bert_pair", "tags": "bert_ner", "texts": "bert_bi_encoder",
             "corpus": "bert_lm", "corpus_sop": "bert_pretrain"},
    "hf": {"single": "hf_single", "pair": "hf_pair", "tags": "bert_ner", "texts": "bert_bi_encoder"},
}


@pytest.fixture(scope="session")
def matrix_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("matrix")
    write_vocab(root / "vocab.txt")
    build_hf_folder(root / "tiny_bert_hf")
    return root


@pytest.fixture(scope="session")
def matrix_data(matrix_root: Path):
    """(family, shape) -> data_dir, prepared on first use."""
    cache: dict[tuple[str, str], Path] = {}

    def get(family: str, shape: str) -> Path:
        if (family, shape) not in cache:
            source = dict(SOURCES["corpus" if shape.startswith("corpus") else shape])
            processor = PROCESSORS[family][shape]
            tokenizer = {"words": {"tags": "char", "texts": "space"}.get(shape, "char_zh"), "bert": "bert",
                         "hf": "auto"}[family]
            config = {**source, "processor": processor, "tokenizer": tokenizer}
            if family == "bert":
                config["vocab_file"] = str(matrix_root / "vocab.txt")
            elif family == "hf":
                config.update(tokenizer_dir=str(matrix_root / "tiny_bert_hf"), vocab_file=None)
            else:
                config.update(vocab_file=None, threshold=1)
            cache[(family, shape)] = prepro(matrix_root, f"{family}_{shape}", config)
        return cache[(family, shape)]

    return get
