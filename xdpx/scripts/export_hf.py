"""``x-script export_hf config.hjson``: a Hugging Face directory (config.json, model.safetensors, vocab)
that transformers loads as BertForSequenceClassification / BertForMaskedLM / BertForPreTraining and that
gives this run's outputs (checked with transformers; docs/export.md)."""

from __future__ import annotations

from typing import Any

from xdpx.chain import script_main
from xdpx.command import commands, script
from xdpx.config.options import Args, Option
from xdpx.export.command import ExportCommand

NAME = "export_hf"


@commands.register(NAME)
class ExportHf(ExportCommand):
    """Write a BERT run as a transformers directory and check it with transformers."""

    name = NAME
    extra_options = [
        Option("check_outputs", bool, default=True,
               doc="load the written directory with transformers and compare its outputs with the run's model "
                   "on real samples (needs transformers: pip install xdpx[hf])"),
    ]

    def export(self, args: Args, run: Any, samples: list[dict[str, Any]]) -> None:
        from xdpx.export.companions import write_companions
        from xdpx.export.hf import check_hf_directory, write_hf_directory

        architecture = write_hf_directory(run, args.out_dir)
        parity = "not checked (check_outputs: false)"
        if args.check_outputs:
            parity = check_hf_directory(run, args.out_dir, architecture, samples).describe()
        write_companions(run, args.out_dir, {"format": "huggingface", "architecture": architecture,
                                             "call": f"transformers.{architecture}.from_pretrained(out_dir)",
                                             "parity": parity})
        print(f"wrote {args.out_dir} ({architecture}); parity with transformers: {parity}")


@script(NAME)
def main(argv: list[str]) -> int:
    """Export a BERT run as a Hugging Face directory: x-script export_hf config.hjson (save_dir, out_dir)."""
    return script_main(NAME, argv)
