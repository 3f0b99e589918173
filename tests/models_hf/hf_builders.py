"""Tiny random transformers models of each architecture, with a matching tokenizer trained on the
committed samples: real classes and file formats (config.json, model.safetensors, tokenizer.json,
tokenizer_config.json) written by transformers' own save_pretrained, random weights (hidden 32, 2 layers,
2 heads). Nothing is downloaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "examples" / "data" / "sample"
SIZE = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
        "max_position_embeddings": 128}

# tokenizer kind -> special tokens (pad, unk, cls/bos, sep/eos, mask) and whether it has token types
WORDPIECE = {"pad": "[PAD]", "unk": "[UNK]", "cls": "[CLS]", "sep": "[SEP]", "mask": "[MASK]"}
BPE_ROBERTA = {"pad": "<pad>", "unk": "<unk>", "cls": "<s>", "sep": "</s>", "mask": "<mask>"}
BPE_BERT_STYLE = WORDPIECE  # ModernBERT: byte-level BPE with BERT's special tokens
UNIGRAM_XLMR = BPE_ROBERTA
UNIGRAM_BERT_STYLE = WORDPIECE  # DeBERTa-v2/v3, ALBERT: SentencePiece unigram with [CLS]/[SEP]

# architecture -> (tokenizer kind, config overrides)
ARCHITECTURES: dict[str, tuple[str, dict[str, Any]]] = {
    "bert": ("wordpiece", {}),
    "roberta": ("bpe_roberta", {"max_position_embeddings": 130, "type_vocab_size": 1}),
    "xlm-roberta": ("unigram_xlmr", {"max_position_embeddings": 130, "type_vocab_size": 1}),
    "deberta-v2": ("unigram_bert", {"relative_attention": True, "position_biased_input": False,
                                    "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1,
                                    "position_buckets": 32, "norm_rel_ebd": "layer_norm", "share_att_key": True,
                                    "type_vocab_size": 0}),
    "electra": ("wordpiece", {"embedding_size": 16}),
    "albert": ("unigram_bert", {"embedding_size": 16, "num_hidden_groups": 1, "inner_group_num": 1}),
    "distilbert": ("wordpiece", {"dim": 32, "n_layers": 2, "n_heads": 2, "hidden_dim": 64}),
    "modernbert": ("bpe_bert", {"global_attn_every_n_layers": 1, "local_attention": 16}),
}
SPECIALS = {"wordpiece": WORDPIECE, "bpe_roberta": BPE_ROBERTA, "bpe_bert": BPE_BERT_STYLE,
            "unigram_xlmr": UNIGRAM_XLMR, "unigram_bert": UNIGRAM_BERT_STYLE}


def sample_texts() -> list[str]:
    """English sentences of the committed samples: polarity (label, text) and STS-B pairs."""
    texts = []
    for split in ("train", "dev", "test"):
        for line in (SAMPLES / "polarity" / f"{split}.txt").read_text(encoding="utf-8").splitlines():
            texts.append(line.split("\t", 1)[1])
        for line in (SAMPLES / "stsb" / f"{split}.tsv").read_text(encoding="utf-8").splitlines():
            texts.extend(line.split("\t")[5:7])
    return texts


def train_tokenizer(kind: str, vocab_size: int = 600, texts: list[str] | None = None) -> Any:
    """A fast tokenizer (transformers.PreTrainedTokenizerFast) of ``kind`` trained on the samples (or ``texts``)."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    s = SPECIALS[kind]
    specials = [s["pad"], s["unk"], s["cls"], s["sep"], s["mask"]]
    if kind == "wordpiece":
        tok = Tokenizer(models.WordPiece(unk_token=s["unk"]))
        tok.normalizer = normalizers.BertNormalizer(lowercase=True)
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece()
        trainer = trainers.WordPieceTrainer(vocab_size=vocab_size, special_tokens=specials)
    elif kind.startswith("bpe"):
        tok = Tokenizer(models.BPE(unk_token=s["unk"]))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        tok = Tokenizer(models.Unigram())
        tok.normalizer = normalizers.Lowercase()
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
        tok.decoder = decoders.Metaspace()
        trainer = trainers.UnigramTrainer(vocab_size=vocab_size, special_tokens=specials, unk_token=s["unk"])
    tok.train_from_iterator(texts or sample_texts(), trainer)
    cls, sep = (s["cls"], tok.token_to_id(s["cls"])), (s["sep"], tok.token_to_id(s["sep"]))
    if kind in ("bpe_roberta", "unigram_xlmr"):  # <s> A </s></s> B </s>, no token types
        tok.post_processor = processors.TemplateProcessing(
            single=f"{s['cls']} $A {s['sep']}", pair=f"{s['cls']} $A {s['sep']} {s['sep']} $B {s['sep']}",
            special_tokens=[cls, sep])
    else:  # [CLS] A [SEP] B [SEP], token types 0 / 1
        tok.post_processor = processors.TemplateProcessing(
            single=f"{s['cls']} $A {s['sep']}", pair=f"{s['cls']} $A {s['sep']} $B:1 {s['sep']}:1",
            special_tokens=[cls, sep])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token=s["pad"], unk_token=s["unk"],
                                   cls_token=s["cls"], sep_token=s["sep"], mask_token=s["mask"],
                                   bos_token=s["cls"], eos_token=s["sep"])


def build_model_folder(architecture: str, folder: Path, tokenizer: Any | None = None, seed: int = 0) -> Path:
    """config.json + model.safetensors + tokenizer files of a tiny random ``architecture`` in ``folder``."""
    import torch
    from transformers import AutoConfig, AutoModel

    kind, overrides = ARCHITECTURES[architecture]
    tokenizer = tokenizer or train_tokenizer(kind)
    size = {} if architecture == "distilbert" else dict(SIZE)
    if architecture == "distilbert":
        size["max_position_embeddings"] = SIZE["max_position_embeddings"]
    ids = {"pad_token_id": tokenizer.pad_token_id, "bos_token_id": tokenizer.cls_token_id,
           "eos_token_id": tokenizer.sep_token_id}
    if architecture == "modernbert":
        ids.update(cls_token_id=tokenizer.cls_token_id, sep_token_id=tokenizer.sep_token_id)
    config = AutoConfig.for_model(architecture, vocab_size=len(tokenizer), **ids, **{**size, **overrides})
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


# decoder-only architectures (encoder: hf, pooling last) -> config overrides; their tokenizer is a byte-level
# BPE without [CLS]/[SEP]: Qwen2's adds nothing around a text, Llama's a beginning-of-text token
DECODERS: dict[str, dict[str, Any]] = {
    "qwen2": {"num_key_value_heads": 1, "tie_word_embeddings": False},
    "llama": {"num_key_value_heads": 1, "tie_word_embeddings": False},
}


def decoder_tokenizer(architecture: str, texts: list[str] | None = None) -> Any:
    """A byte-level BPE of the samples with a pad token; Llama's adds <s> before each text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<|pad|>", "<unk>", "<s>", "</s>"]
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts or sample_texts(), trainers.BpeTrainer(
        vocab_size=600, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if architecture == "llama":
        tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A $B:1",
                                                           special_tokens=[("<s>", tok.token_to_id("<s>"))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<|pad|>", unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")


def build_decoder_folder(architecture: str, folder: Path, seed: int = 0) -> Path:
    """config.json + model.safetensors + tokenizer files of a tiny random decoder-only model."""
    import torch
    from transformers import AutoConfig, AutoModel

    tokenizer = decoder_tokenizer(architecture)
    config = AutoConfig.for_model(architecture, vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id,
                                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                                  **{**SIZE, **DECODERS[architecture]})
    torch.manual_seed(seed)
    AutoModel.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
