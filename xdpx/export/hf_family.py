"""export_hf for the transformers encoder family (encoder: hf): a folder transformers loads.

- The tagging head (without a CRF) is transformers' *ForTokenClassification (dropout and a Linear over every
  token): the folder is that class (``AutoModelForTokenClassification``).

- BERT and ALBERT with ``pooling: pooler`` are exactly transformers' *ForSequenceClassification (dropout
  and a Linear over the pooler): the folder is that class, written by its own ``save_pretrained``, and
  ``AutoModelForSequenceClassification.from_pretrained(out_dir)`` gives the run's logits.
- Every other case (cls or mean pooling, other architectures, whose transformers heads differ): the encoder
  by ``save_pretrained`` (``AutoModel.from_pretrained(out_dir)``) and the head beside it, head.safetensors
  (``classifier.weight``, ``classifier.bias``) with head.json saying the pooling.

Either way the check loads the folder back with transformers and compares with the run's model on real
batches (the save_pretrained round trip).
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

from xdpx import io
from xdpx.errors import UserError
from xdpx.export.companions import labels_of
from xdpx.export.parity import ParityReport, check_parity, parity_batches
from xdpx.models.choice import head_name, model_label
from xdpx.utils.optional import require

HEAD_WEIGHTS, HEAD_CONFIG = "head.safetensors", "head.json"
SEQUENCE_CLASSIFICATION = ("bert", "albert")  # dropout + Linear over the pooler: ours with pooling: pooler
AUTO_MODEL = "AutoModel+head"


def is_hf_family(model: Any) -> bool:
    return hasattr(model, "encoder_module") and hasattr(model, "hf_model_type") and hasattr(model, "classifier") \
        and not hasattr(model, "bert")


def architecture_of(run: Any) -> str:
    model = run.model
    if head_name(run.args) not in ("classification", "tagging"):
        raise UserError(f"export_hf: {model_label(run.args)} has no transformers class (the transformers encoders "
                        "export with the classification and tagging heads, and as bi-encoders); use "
                        "export_torchscript or export_onnx for it")
    if head_name(run.args) == "tagging":
        if model.text_encoder.args.get("crf"):
            raise UserError(f"export_hf: {model_label(run.args)} has a CRF, which transformers' token "
                            "classification has not; export_torchscript or export_onnx keep the tag scores")
        return "AutoModelForTokenClassification"
    if model.hf_model_type() in SEQUENCE_CLASSIFICATION and run.args.pooling == "pooler":
        return "AutoModelForSequenceClassification"
    return AUTO_MODEL


def _labels(run: Any) -> dict[str, Any]:
    labels = labels_of(run)
    head = run.model.task_head
    count = getattr(head, "num_outputs", None) or head.num_tags
    if labels is None or len(labels) != count:
        labels = [f"LABEL_{i}" for i in range(count)]
    out: dict[str, Any] = {"num_labels": count, "id2label": dict(enumerate(labels)),
                           "label2id": {label: i for i, label in enumerate(labels)}}
    if count == 1 and run.args.get("target_type") == "regression":
        out["problem_type"] = "regression"
    return out


def write_directory(run: Any, out_dir: str) -> str:
    """Write the run as a transformers folder (see the module docstring); return its architecture."""
    transformers = require("transformers", "export_hf")
    from safetensors.torch import save as save_safetensors  # lazy: loads safetensors

    model, architecture = run.model, architecture_of(run)
    with tempfile.TemporaryDirectory() as local:
        if architecture != AUTO_MODEL:  # transformers' own head class: the encoder under its base-model prefix
            config = model.encoder.config.__class__.from_dict({**model.encoder.config.to_dict(), **_labels(run)})
            hf_model = getattr(transformers, architecture).from_config(config)
            prefix = hf_model.base_model_prefix
            state = {f"{prefix}.{k}": v for k, v in model.encoder.state_dict().items()}
            state.update({f"classifier.{k}": v for k, v in model.classifier.state_dict().items()})
            missing, unexpected = hf_model.load_state_dict(state, strict=False)
            if missing or unexpected:
                raise RuntimeError(f"export_hf: {type(hf_model).__name__} keys differ: {missing} {unexpected}")
            hf_model.save_pretrained(local)
        else:
            model.encoder.save_pretrained(local)
            head = {f"classifier.{k}": v.detach().contiguous() for k, v in model.classifier.state_dict().items()}
            with open(os.path.join(local, HEAD_WEIGHTS), "wb") as f:
                f.write(save_safetensors(head, metadata={"format": "pt"}))
            with open(os.path.join(local, HEAD_CONFIG), "w", encoding="utf-8") as f:
                json.dump({"pooling": run.args.pooling, **_labels(run),
                           "how": "logits = classifier(pool(AutoModel(out_dir)(...).last_hidden_state)); pool: "
                                  "cls = first token, mean = mean over attention_mask, pooler = pooler_output"},
                          f, indent=1, ensure_ascii=False)
        tokenizer_json = io.join(run.args.data_dir, "tokenizer.json")
        if io.exists(io.join(run.save_dir, "tokenizer.json")):
            tokenizer_json = io.join(run.save_dir, "tokenizer.json")
        if io.exists(tokenizer_json):  # the run's tokenizer, with its special tokens, as a transformers tokenizer
            with io.open(tokenizer_json) as f:
                from tokenizers import Tokenizer  # lazy: loads tokenizers

                tokenizer = transformers.PreTrainedTokenizerFast(
                    tokenizer_object=Tokenizer.from_str(f.read()), pad_token=run.args.get("pad_word"),
                    unk_token=run.args.get("unk_word"), model_max_length=int(run.args.get("max_len") or 512))
            tokenizer.save_pretrained(local)
        io.makedirs(out_dir)
        for name in sorted(os.listdir(local)):
            io.copy(os.path.join(local, name), io.join(out_dir, name))
    return architecture


def check_directory(run: Any, out_dir: str, architecture: str, samples: list[dict[str, Any]]) -> ParityReport:
    """Load out_dir with transformers and compare with the run's model on real batches."""
    import torch  # lazy: loads torch
    from safetensors.torch import load as load_safetensors  # lazy: loads safetensors

    from xdpx.models.bert_layers import mean_pool  # lazy: loads torch

    transformers = require("transformers", "export_hf's check (check_outputs: true; false skips it)")
    local = out_dir if not io.is_remote(out_dir) else tempfile.mkdtemp(prefix="xdpx-hf-")
    if local != out_dir:
        io.copytree(out_dir, local)
    squeeze = getattr(run.model.task_head, "num_outputs", 0) == 1
    if architecture != AUTO_MODEL:
        hf_model = getattr(transformers, architecture).from_pretrained(local).eval()

        def hf_outputs(b: dict[str, Any]) -> Any:
            logits = hf_model(**{k: v for k, v in b.items() if k != "token_type_ids" or run.model.text_encoder.takes_token_types}).logits
            return logits.squeeze(-1) if squeeze else logits
    else:
        encoder = transformers.AutoModel.from_pretrained(local).eval()
        with open(os.path.join(local, HEAD_WEIGHTS), "rb") as f:
            head = load_safetensors(f.read())
        with open(os.path.join(local, HEAD_CONFIG), encoding="utf-8") as f:
            pooling = json.load(f)["pooling"]

        def hf_outputs(b: dict[str, Any]) -> Any:
            inputs = {"input_ids": b["input_ids"], "attention_mask": b["attention_mask"]}
            if run.model.text_encoder.takes_token_types:
                inputs["token_type_ids"] = b["token_type_ids"]
            out = encoder(**inputs)
            pooled = out.pooler_output if pooling == "pooler" else mean_pool(out.last_hidden_state, b["attention_mask"]) \
                if pooling == "mean" else out.last_hidden_state[:, 0]
            logits = torch.nn.functional.linear(pooled, head["classifier.weight"], head["classifier.bias"])
            return logits.squeeze(-1) if squeeze else logits

    batches = parity_batches(run.processor, samples)
    eager, exported = (lambda b: run.model(**b)), hf_outputs
    if architecture == "AutoModelForTokenClassification":  # the tags of real tokens (padding reads other positions)
        def real(outputs: Any, b: dict[str, Any]) -> Any:
            return outputs * b["attention_mask"].unsqueeze(-1)

        eager, exported = (lambda b: real(run.model(**b), b)), (lambda b: real(hf_outputs(b), b))
    with torch.no_grad():
        return check_parity(eager, exported, batches, f"transformers {architecture}", atol=1e-5, rtol=1e-4)
