"""export_hf of a bi-encoder (``head: bi_encoder`` on a transformer encoder): a sentence-transformers
folder, so that ``sentence_transformers.SentenceTransformer(out_dir)`` gives the run's embeddings.

    modules.json, sentence_bert_config.json     the pipeline: Transformer -> Pooling [-> Dense] [-> Normalize]
    config.json, model.safetensors, tokenizer   the encoder as a transformers AutoModel (our BERT as BertModel)
    1_Pooling/config.json                       the run's pooling (cls, mean, max, last)
    2_Dense/                                    the head's projection (projection_size), when it has one
    N_Normalize/                                L2 normalisation (normalize: true)

The check loads the folder with sentence-transformers itself and compares its ``encode`` of the real
samples' texts with the run's embeddings.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import numpy as np

from xdpx import io
from xdpx.errors import UserError
from xdpx.export.parity import ParityReport, check_parity
from xdpx.utils.optional import require

POOLING_MODES = {"cls": "pooling_mode_cls_token", "mean": "pooling_mode_mean_tokens",
                 "max": "pooling_mode_max_tokens", "last": "pooling_mode_lasttoken"}


def check_exportable(run: Any) -> None:
    model = run.model
    encoder = getattr(model, "text_encoder", None)
    if encoder is None or not encoder.layered:
        raise UserError("export_hf: a sentence-transformers folder holds a transformer encoder; this bi-encoder's "
                        "encoder is not one (the CNN and LSTM: use export_torchscript or export_onnx)")
    if encoder.args.pooling not in POOLING_MODES:
        raise UserError(f"export_hf: sentence-transformers has no pooling {encoder.args.pooling!r}; it pools by "
                        f"{', '.join(POOLING_MODES)}")


def _tokenizer(run: Any, local: str) -> None:
    """The run's tokenizer as transformers files: its tokenizer.json (tokenizer: auto) or its WordPiece
    vocabulary (tokenizer: bert)."""
    transformers = require("transformers", "export_hf")
    args = run.args
    tokenizer_json = next((p for p in (io.join(run.save_dir, "tokenizer.json"), io.join(args.data_dir, "tokenizer.json"))
                           if io.exists(p)), None)
    if tokenizer_json is not None:
        from tokenizers import Tokenizer  # lazy: loads tokenizers

        with io.open(tokenizer_json) as f:
            tokenizer = transformers.PreTrainedTokenizerFast(
                tokenizer_object=Tokenizer.from_str(f.read()), pad_token=args.get("pad_word"),
                unk_token=args.get("unk_word"), cls_token=args.get("cls_word"), sep_token=args.get("sep_word"))
    else:
        vocab = io.join(run.save_dir, "vocab.txt")
        tokenizer = transformers.BertTokenizerFast(io.cached_path(vocab) if io.is_remote(vocab) else vocab,
                                                   do_lower_case=bool(args.get("lower", True)),
                                                   strip_accents=args.get("strip_accents"))
    tokenizer.model_max_length = int(args.get("max_len") or 512)
    tokenizer.save_pretrained(local)


def write_folder(run: Any, out_dir: str) -> str:
    """Write the sentence-transformers folder; return the description export.json records."""
    from safetensors.torch import save as save_safetensors  # lazy: loads safetensors

    check_exportable(run)
    encoder, head = run.model.text_encoder, run.model.task_head
    modules = [{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
               {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"}]
    with tempfile.TemporaryDirectory() as local:
        backbone = encoder.encoder_module()
        if hasattr(backbone, "save_pretrained"):  # a transformers AutoModel
            backbone.save_pretrained(local)
        else:  # our BERT: BertModel's keys are ours without the bert. prefix
            state = {k: v.detach().contiguous() for k, v in backbone.state_dict().items()}
            with open(os.path.join(local, "model.safetensors"), "wb") as f:
                f.write(save_safetensors(state, metadata={"format": "pt"}))
            with open(os.path.join(local, "config.json"), "w", encoding="utf-8") as f:
                json.dump(encoder.hf_config(), f, indent=1)
        _tokenizer(run, local)
        with open(os.path.join(local, "sentence_bert_config.json"), "w", encoding="utf-8") as f:
            json.dump({"max_seq_length": int(run.args.get("max_len") or 512), "do_lower_case": False}, f)
        os.makedirs(os.path.join(local, "1_Pooling"))
        with open(os.path.join(local, "1_Pooling", "config.json"), "w", encoding="utf-8") as f:
            json.dump({"word_embedding_dimension": encoder.width,
                       **{mode: name == encoder.args.pooling for name, mode in POOLING_MODES.items()}}, f, indent=1)
        if head.projection is not None:
            path = "2_Dense"
            os.makedirs(os.path.join(local, path))
            weights = {f"linear.{k}": v.detach().contiguous() for k, v in head.projection.state_dict().items()}
            with open(os.path.join(local, path, "model.safetensors"), "wb") as f:
                f.write(save_safetensors(weights, metadata={"format": "pt"}))
            with open(os.path.join(local, path, "config.json"), "w", encoding="utf-8") as f:
                json.dump({"in_features": head.projection.in_features, "out_features": head.projection.out_features,
                           "bias": True, "activation_function": "torch.nn.modules.linear.Identity"}, f)
            modules.append({"idx": 2, "name": "2", "path": path, "type": "sentence_transformers.models.Dense"})
        if head.args.normalize:
            index = len(modules)
            os.makedirs(os.path.join(local, f"{index}_Normalize"))
            modules.append({"idx": index, "name": str(index), "path": f"{index}_Normalize",
                            "type": "sentence_transformers.models.Normalize"})
        with open(os.path.join(local, "modules.json"), "w", encoding="utf-8") as f:
            json.dump(modules, f, indent=1)
        io.makedirs(out_dir)
        for module in modules[1:]:  # Normalize has no files: its folder alone
            io.makedirs(io.join(out_dir, module["path"]))
        for root, _dirs, files in os.walk(local):
            for name in files:
                relative = os.path.relpath(os.path.join(root, name), local)
                io.copy(os.path.join(root, name), io.join(out_dir, *relative.split(os.sep)))
    return "SentenceTransformer"


def check_folder(run: Any, out_dir: str, samples: list[dict[str, Any]]) -> ParityReport:
    """sentence-transformers' own encode of the samples' texts against the run's embeddings."""
    import torch  # lazy: loads torch

    st = require("sentence_transformers", "export_hf's check of a bi-encoder (check_outputs: false skips it)")
    local = out_dir if not io.is_remote(out_dir) else tempfile.mkdtemp(prefix="xdpx-st-")
    if local != out_dir:
        io.copytree(out_dir, local)
    loaded = st.SentenceTransformer(local, device="cpu", local_files_only=True)
    # texts of the samples (their first text, decoded by the run's tokenizer): both sides encode these strings
    decoder = run.processor.tokenizer.tokenizer
    texts = [decoder.decode([int(i) for i in s["tokens1"]], skip_special_tokens=True) for s in samples]
    batches = [{"texts": np.asarray(group, dtype=object)} for group in (texts[:1], texts[1:4], texts[4:12]) if group]

    def ours(batch: dict[str, Any]) -> Any:
        samples = [dict(run.processor.encode(t), id=i) for i, t in enumerate(batch["texts"].tolist())]
        with torch.no_grad():
            return run.model(**run.processor.collate(samples)["net_input"])[:, 0]

    def theirs(batch: dict[str, Any]) -> Any:
        group = batch["texts"].tolist()
        return torch.from_numpy(loaded.encode(group, batch_size=len(group), convert_to_numpy=True))

    return check_parity(ours, theirs, batches, "sentence-transformers", atol=1e-5, rtol=1e-4)
