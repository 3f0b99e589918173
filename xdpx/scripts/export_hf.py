"""``x-script export_hf config.hjson``: a Hugging Face directory (config.json, model.safetensors, vocab)
that transformers loads as BertForSequenceClassification / BertForTokenClassification / BertForMaskedLM /
BertForPreTraining (or the AutoModelFor* class of a transformers encoder), or for a bi-encoder a folder that
sentence_transformers.SentenceTransformer loads; checked against this run's outputs (docs/export.md)."""

from __future__ import annotations

from typing import Any

from xdpx.chain import script_main
from xdpx.command import commands, script
from xdpx.config.options import Args, Option
from xdpx.export.command import ExportCommand
from xdpx.export.companions import write_companions

NAME = "export_hf"


@commands.register(NAME)
class ExportHf(ExportCommand):
    """Write a run as a transformers directory (a bi-encoder: a sentence-transformers folder) and check it."""

    name = NAME
    extra_options = [
        Option("check_outputs", bool, default=True,
               doc="load the written directory with transformers and compare its outputs with the run's model "
                   "on real samples (needs transformers: pip install xdpx[hf])"),
    ]

    def export(self, args: Args, run: Any, samples: list[dict[str, Any]]) -> None:
        # lazy: export.hf needs numpy; x-prepro --dry loads every command without it
        from xdpx.export.hf import check_hf_directory, write_hf_directory

        architecture = write_hf_directory(run, args.out_dir)
        parity = "not checked (check_outputs: false)"
        if args.check_outputs:
            parity = check_hf_directory(run, args.out_dir, architecture, samples).describe()
        library = "sentence_transformers" if architecture == "SentenceTransformer" else "transformers"
        call = f"{library}.{architecture}(out_dir)" if library == "sentence_transformers" else \
            f"transformers.{architecture}.from_pretrained(out_dir)"
        write_companions(run, args.out_dir, {"format": "huggingface", "architecture": architecture, "call": call,
                                             "parity": parity})
        print(f"wrote {args.out_dir} ({architecture}); parity with {library.replace('_', '-')}: {parity}")


@script(NAME)
def main(argv: list[str]) -> int:
    """Export a run as a Hugging Face directory, a bi-encoder as a sentence-transformers folder: x-script export_hf config.hjson (save_dir, out_dir)."""
    return script_main(NAME, argv)
