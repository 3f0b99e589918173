"""A Hugging Face directory from a BERT run (the transformers family: xdpx/export/hf_family.py): config.json (the model's ``hf_config()``), model.safetensors
(our parameter names are HF's, so the state_dict is written as is, tied duplicates left out as
``save_pretrained`` does), and the tokenizer files (vocab.txt, tokenizer_config.json).

The check loads the directory with ``transformers`` (BertForSequenceClassification, BertForMaskedLM or
BertForPreTraining, as config.json names) and compares its outputs with ours on real batches.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from xdpx import io
from xdpx.errors import UserError
from xdpx.export import hf_family, sentence_transformers
from xdpx.export.companions import labels_of
from xdpx.export.parity import ParityReport, check_parity, parity_batches
from xdpx.models.choice import composition, head_name, model_label
from xdpx.models.tf_checkpoint import TIED_KEYS
from xdpx.utils.optional import require

# What transformers calls our BERT with each head (a bi-encoder becomes a sentence-transformers folder)
HF_CLASSES = {"classification": "BertForSequenceClassification", "tagging": "BertForTokenClassification",
              "mlm": "BertForMaskedLM", "pretrain": "BertForPreTraining"}


def check_exportable(run: Any) -> str:
    """The transformers class for the run's model, or a UserError saying why there is none."""
    pair = composition(run.args)
    label = model_label(run.args)
    if pair is None or pair[0] != "bert" or pair[1] not in HF_CLASSES:
        raise UserError(f"export_hf: model {label} has no transformers class (it writes our BERT with the heads "
                        f"{', '.join(HF_CLASSES)}, the transformers encoders and bi-encoders); use export_torchscript "
                        "or export_onnx for it")
    options = run.model.text_encoder.args
    if pair[1] == "classification" and (options.pooling != "pooler" or options.get("head_hidden_size")):
        raise UserError(f"export_hf: {label} with pooling: {run.args.pooling} has no transformers equivalent "
                        "(BertForSequenceClassification classifies the pooled [CLS] vector); export_torchscript "
                        "or export_onnx keep it")
    if pair[1] == "tagging" and options.get("crf"):
        raise UserError(f"export_hf: {label} has a CRF, which transformers' BertForTokenClassification has not (it "
                        "would decode otherwise); export_torchscript or export_onnx keep the tag scores")
    return HF_CLASSES[pair[1]]


def tokenizer_config(args: Any) -> dict[str, Any]:
    return {"tokenizer_class": "BertTokenizer", "do_lower_case": bool(args.get("lower", True)),
            "model_max_length": int(args.get("max_len") or args.get("max_position_embeddings") or 512),
            "pad_token": args.get("pad_word", "[PAD]"), "unk_token": args.get("unk_word", "[UNK]"),
            "cls_token": args.get("cls_word", "[CLS]"), "sep_token": args.get("sep_word", "[SEP]"),
            "mask_token": args.get("mask_word", "[MASK]")}


def write_hf_directory(run: Any, out_dir: str) -> str:
    """Write config.json, model.safetensors, vocab.txt, tokenizer_config.json; return the class name."""
    from safetensors.torch import save as save_safetensors  # lazy: loads safetensors

    if head_name(run.args) == "bi_encoder":  # sentence embeddings: a sentence-transformers folder
        return sentence_transformers.write_folder(run, out_dir)
    if hf_family.is_hf_family(run.model):  # the transformers family: transformers' own save_pretrained
        return hf_family.write_directory(run, out_dir)

    architecture = check_exportable(run)
    config = run.model.hf_config()
    config["architectures"] = [architecture]
    labels = labels_of(run)  # from the run directory's target_map.txt: right even if data_dir has moved
    if labels is not None and config.get("num_labels") == len(labels):
        config["id2label"] = {str(i): label for i, label in enumerate(labels)}
        config["label2id"] = {label: i for i, label in enumerate(labels)}
    io.makedirs(out_dir)
    state = {k: v.detach().contiguous() for k, v in run.model.state_dict().items() if k not in TIED_KEYS}
    with io.open(io.join(out_dir, "model.safetensors"), "wb") as f:
        f.write(save_safetensors(state, metadata={"format": "pt"}))
    with io.open(io.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=2, ensure_ascii=False)
    with io.open(io.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tokenizer_config(run.args), f, indent=2, ensure_ascii=False)
    return architecture


def hf_outputs(hf_model: Any, architecture: str, batch: dict[str, Any]) -> Any:
    """transformers' outputs in the layout our model returns."""
    out = hf_model(input_ids=batch["input_ids"], token_type_ids=batch.get("token_type_ids"),
                   attention_mask=batch.get("attention_mask"))
    if architecture == "BertForPreTraining":
        return out.prediction_logits, out.seq_relationship_logits
    logits = out.logits
    return logits.squeeze(-1) if architecture == "BertForSequenceClassification" and logits.size(-1) == 1 else logits


def check_hf_directory(run: Any, out_dir: str, architecture: str, samples: list[dict[str, Any]]) -> ParityReport:
    """Load out_dir with transformers and compare its outputs with the run's model on real batches."""
    if architecture == "SentenceTransformer":
        return sentence_transformers.check_folder(run, out_dir, samples)
    if hf_family.is_hf_family(run.model):
        return hf_family.check_directory(run, out_dir, architecture, samples)

    transformers = require("transformers", "export_hf's check (check_outputs: true; false skips it)")
    local = out_dir if not io.is_remote(out_dir) else None
    if local is None:
        local = tempfile.mkdtemp(prefix="xdpx-hf-")
        io.copytree(out_dir, local)
    hf_model = getattr(transformers, architecture).from_pretrained(local).eval()
    batches = parity_batches(run.processor, samples)
    return check_parity(lambda b: run.model(**b), lambda b: hf_outputs(hf_model, architecture, b), batches,
                        f"transformers {architecture}", atol=1e-5, rtol=1e-4)
