"""``x-script export_pt config.hjson``: convert a TF BERT checkpoint (Google names) to a PyTorch /
Hugging Face directory (config.json, model.safetensors, vocab.txt) that ``pretrained_model`` accepts,
so a TF checkpoint used often is converted once instead of at every x-train (docs/export.md)."""

from __future__ import annotations

from typing import Any

from xdpx.chain import script_main
from xdpx.command import Command, commands, script
from xdpx.config.options import Args, Option
from xdpx.config.ranges import at_least
from xdpx.errors import UserError

NAME = "export_pt"


@commands.register(NAME)
class ExportPt(Command):
    """TF BERT checkpoint -> PyTorch / Hugging Face directory, checked TF against transformers."""

    name = NAME
    group = "export"
    output_key = "out_dir"

    def options(self) -> list[Any]:
        return [
            Option("tf_ckpt_path", str,
                   doc="the TF checkpoint: its prefix (e.g. .../bert_model.ckpt) or its folder; local or remote"),
            Option("tf_config", str, path="input", doc="the checkpoint's bert_config.json"),
            Option("out_dir", str, path="output", doc="the folder the PyTorch model is written to"),
            Option("num_classes", int, default=None, validate=at_least(1),
                   doc="classes of the checkpoint's classifier (output_weights), checked against it; null: "
                       "taken from the checkpoint. A checkpoint without a classifier becomes a bare encoder"),
            Option("check_outputs", bool, default=True,
                   doc="run the TF checkpoint in TensorFlow and the converted model in transformers on the same "
                       "inputs and compare (needs transformers: pip install xdpx[hf])"),
        ]

    def run(self, args: Args, dry: bool = False) -> None:
        if dry:
            return
        # lazy: needs numpy; x-prepro --dry loads every command without it
        from xdpx.export.tf_import import check_conversion, convert

        architecture, config = convert(args.tf_ckpt_path, args.tf_config, args.out_dir, args.num_classes)
        parity = "not checked (check_outputs: false)"
        if args.check_outputs:
            # lazy: needs numpy; x-prepro --dry loads every command without it
            from xdpx.export.parity import ParityError

            try:
                parity = check_conversion(args.tf_ckpt_path, args.out_dir, architecture, config).describe()
            except ParityError as e:
                raise UserError(f"the conversion in {args.out_dir} failed its check: {e}") from e
        print(f"wrote {args.out_dir} ({architecture}); TF checkpoint vs converted model: {parity}")


@script(NAME)
def main(argv: list[str]) -> int:
    """Convert a TF BERT checkpoint to PyTorch: x-script export_pt config.hjson (tf_ckpt_path, tf_config, out_dir)."""
    return script_main(NAME, argv)
