"""``x-script export_tf config.hjson``: a run as a TF SavedModel (default; BERT models and cls_cnn,
cls_lstm, match_cnn, re2; ``init_tables: true``: raw text in, tokenized inside the SavedModel) or a BERT
run as a TF checkpoint under Google BERT's variable names with bert_config.json and vocab.txt
(docs/export.md). Needs tensorflow-cpu (pip install xdpx[tf])."""

from __future__ import annotations

import json
from typing import Any

from xdpx import io
from xdpx.chain import script_main
from xdpx.command import commands, script
from xdpx.config.options import Args, Option
from xdpx.errors import UserError
from xdpx.export.command import ExportCommand
from xdpx.export.companions import write_companions
from xdpx.models.choice import model_label

NAME = "export_tf"
# Keys of Google's bert_config.json (transformers' config.json uses the same names).
GOOGLE_CONFIG_KEYS = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size",
                      "initializer_range", "intermediate_size", "max_position_embeddings", "num_attention_heads",
                      "num_hidden_layers", "type_vocab_size", "vocab_size")

SAVEDMODEL_OPTIONS = [
    Option("signature_def_key", str, default="serving_default", doc="name of the SavedModel's serving signature"),
    Option("init_tables", bool, default=False,
           doc="the SavedModel takes raw text (inputs text, or text1 and text2 for pairs) and does the run's "
               "tokenization (space, char_zh) and vocabulary lookup itself (a lookup table from vocab.txt), so "
               "TF Serving clients need no tokenizer; outputs logits, probabilities and label (score for "
               "regression), and the signature <signature_def_key>_ids still takes token ids. false: token ids "
               "in (the original XDPX's default was true; BERT's WordPiece and jieba have no TF form here)"),
    Option("fix_len", bool, default=False,
           doc="inputs of a fixed length (the run's max_len; pad shorter batches) instead of dynamic padding"),
    Option("check_outputs", bool, default=True,
           doc="load the SavedModel with TensorFlow and compare its outputs with the PyTorch model on real samples"),
]
CHECKPOINT_OPTIONS = [
    Option("out_name", str, default="bert_model.ckpt", doc="prefix of the checkpoint files in out_dir"),
]


@commands.register(NAME)
class ExportTf(ExportCommand):
    """Write a run as a TF SavedModel, or a BERT run as a Google-BERT-named TF checkpoint."""

    name = NAME
    extra_options = [
        Option("export_format", str, default="savedmodel", choices=("savedmodel", "checkpoint"),
               children={"savedmodel": SAVEDMODEL_OPTIONS, "checkpoint": CHECKPOINT_OPTIONS},
               doc="savedmodel: a TF SavedModel with one serving signature; checkpoint: a TF checkpoint with "
                   "Google BERT's variable names, bert_config.json and vocab.txt (read back and compared)"),
        Option("strict_size", bool, default=True,
               doc="every parameter must have a TF BERT name (checkpoint format); false: leave out the ones that "
                   "have none (they are listed)"),
    ]

    def export(self, args: Args, run: Any, samples: list[dict[str, Any]]) -> None:
        # lazy: needs numpy; x-prepro --dry loads every command without it
        from xdpx.models.tf_checkpoint import require_tensorflow

        if run.args.model is None:
            raise UserError(f"export_tf writes the models of its table by name (BERT, cls_cnn, cls_lstm, match_cnn, "
                            f"re2), not a model of encoder and head ({model_label(run.args)}): train it under "
                            "the name it has (e.g. model: cls_cnn), or use export_onnx / export_torchscript")
        require_tensorflow()
        if args.export_format == "checkpoint":
            info = self.write_checkpoint(args, run)
        else:
            info = self.write_savedmodel(args, run, samples)
        write_companions(run, args.out_dir, info)
        print(f"wrote {args.out_dir} ({args.export_format}); parity: {info['parity']}")

    def write_checkpoint(self, args: Args, run: Any) -> dict[str, Any]:
        import numpy as np  # lazy: x-prepro --dry loads every command without numpy

        from xdpx.export.tf_savedmodel import SAVEDMODEL_MODELS, inputs_of  # lazy: numpy, as above

        # lazy: numpy, as above
        from xdpx.models.tf_checkpoint import hf_to_tf_name, read_tf_bert_checkpoint, write_tf_bert_checkpoint

        if run.args.model not in SAVEDMODEL_MODELS:
            inputs_of(run.args.model)  # a model with no TF form at all: the error lists those that have one
            raise UserError(f"export_tf: export_format: checkpoint writes Google BERT's variable names, which model "
                            f"{run.args.model!r} has not: use export_format: savedmodel (from_tf reads its "
                            "variables back)")
        state = dict(run.model.state_dict())
        unnamed = [k for k in state if hf_to_tf_name(k) is None and not k.startswith("cls.predictions.decoder.")]
        if unnamed and args.strict_size:
            raise UserError(f"export_tf: parameters with no TF BERT name: {unnamed[:5]} (model {run.args.model}); "
                            "set strict_size: false to leave them out")
        kept = {k: v for k, v in state.items() if k not in unnamed}
        prefix = write_tf_bert_checkpoint(kept, args.out_dir, args.out_name)
        config = {k: v for k, v in run.model.hf_config().items() if k in GOOGLE_CONFIG_KEYS}
        with io.open(io.join(args.out_dir, "bert_config.json"), "w") as f:
            json.dump(config, f, indent=2)
        # The check: TensorFlow reads the files back to exactly our weights.
        back = read_tf_bert_checkpoint(prefix)
        worst = 0.0
        for key, value in kept.items():
            if key in back:
                worst = max(worst, float(np.max(np.abs(back[key] - value.detach().float().numpy()), initial=0.0)))
        missing = [k for k in kept if k not in back]
        if missing or worst > 0:
            raise UserError(f"export_tf: the written checkpoint does not read back to the model's weights "
                            f"(missing {missing[:5]}, max difference {worst})")
        return {"format": "tf_checkpoint", "file": args.out_name, "left_out": unnamed,
                "parity": f"read back with TensorFlow: {len(kept)} tensors identical"}

    def write_savedmodel(self, args: Args, run: Any, samples: list[dict[str, Any]]) -> dict[str, Any]:
        # lazy: needs numpy; x-prepro --dry loads every command without it
        from xdpx.export.tf_savedmodel import check_savedmodel, write_savedmodel

        layout = write_savedmodel(run, args.out_dir, args.signature_def_key, args.fix_len, args.init_tables)
        parity = "not checked (check_outputs: false)"
        if args.check_outputs:
            parity = check_savedmodel(run, args.out_dir, layout, samples)
        return {"format": "tf_savedmodel", "signature_def_key": args.signature_def_key,
                "inputs": layout.signatures[args.signature_def_key], "signatures": layout.signatures,
                "init_tables": args.init_tables, "fix_len": layout.fix_len, "parity": parity}


@script(NAME)
def main(argv: list[str]) -> int:
    """Export a run to TF: x-script export_tf config.hjson (export_format: savedmodel or checkpoint)."""
    return script_main(NAME, argv)
