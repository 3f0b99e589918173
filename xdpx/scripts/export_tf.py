"""``x-script export_tf config.hjson``: a BERT run as a TF SavedModel (default) or a TF checkpoint under
Google BERT's variable names with bert_config.json and vocab.txt (docs/export.md). Needs tensorflow-cpu
(pip install xdpx[tf])."""

from __future__ import annotations

import json
from typing import Any

from xdpx.chain import script_main
from xdpx.command import commands, script
from xdpx.config.options import Args, Option
from xdpx.errors import UserError
from xdpx.export.command import ExportCommand

NAME = "export_tf"
# Keys of Google's bert_config.json (transformers' config.json uses the same names).
GOOGLE_CONFIG_KEYS = ("attention_probs_dropout_prob", "hidden_act", "hidden_dropout_prob", "hidden_size",
                      "initializer_range", "intermediate_size", "max_position_embeddings", "num_attention_heads",
                      "num_hidden_layers", "type_vocab_size", "vocab_size")

SAVEDMODEL_OPTIONS = [
    Option("signature_def_key", str, default="serving_default", doc="name of the SavedModel's serving signature"),
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
    """Write a BERT run as a TF SavedModel or a Google-BERT-named TF checkpoint."""

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
        from xdpx.export.companions import write_companions
        from xdpx.models.tf_checkpoint import require_tensorflow

        require_tensorflow()
        if args.export_format == "checkpoint":
            info = self.write_checkpoint(args, run)
        else:
            info = self.write_savedmodel(args, run, samples)
        write_companions(run, args.out_dir, info)
        print(f"wrote {args.out_dir} ({args.export_format}); parity: {info['parity']}")

    def write_checkpoint(self, args: Args, run: Any) -> dict[str, Any]:
        import numpy as np

        from xdpx import io
        from xdpx.models.tf_checkpoint import hf_to_tf_name, read_tf_bert_checkpoint, write_tf_bert_checkpoint

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
        from xdpx.export.tf_savedmodel import INPUTS, check_savedmodel, write_savedmodel

        length = write_savedmodel(run, args.out_dir, args.signature_def_key, args.fix_len)
        parity = "not checked (check_outputs: false)"
        if args.check_outputs:
            parity = check_savedmodel(run, args.out_dir, args.signature_def_key, length, samples).describe()
        return {"format": "tf_savedmodel", "signature_def_key": args.signature_def_key, "inputs": list(INPUTS),
                "fix_len": length, "parity": parity}


@script(NAME)
def main(argv: list[str]) -> int:
    """Export a BERT run to TF: x-script export_tf config.hjson (export_format: savedmodel or checkpoint)."""
    return script_main(NAME, argv)
