"""The base of the export commands: the options every export shares and the steps they share.

An export is a config-driven command (``x-script export_onnx export.hjson``, ``--dry`` checks the
config): the command class is registered in the ``commands`` registry under the tool's name, and the
x-script tool of the same name runs it through the usual dispatcher (xdpx.chain.script_main), so configs,
loops, errors and ``--dry`` behave as for x-train. No torch at module level (``--dry`` stays fast).
"""

from __future__ import annotations

import json
from typing import Any

from xdpx import io
from xdpx.command import Command
from xdpx.config.options import Args, Option
from xdpx.config.ranges import at_least
from xdpx.errors import UserError
from xdpx.export.companions import EXPORT_INFO
from xdpx.inference import TRUST_USER_DIR
from xdpx.io.ownership import Output

# export.json's "format" -> the export that writes it
EXPORT_FORMATS = {"torchscript": "export_torchscript", "onnx": "export_onnx", "huggingface": "export_hf",
                  "tf_checkpoint": "export_tf", "tf_savedmodel": "export_tf"}

RUN_OPTIONS = [
    Option("save_dir", str, path="input", doc="the x-train run directory to export"),
    Option("checkpoint", str, default="<best>",
           doc="<best> (best on the run's valid_subset), <last>, or the full path of a checkpoint file"),
    Option("out_dir", str, path="output", doc="the folder the exported model and its companions are written to"),
    TRUST_USER_DIR,
]

PARITY_OPTIONS = [
    Option("parity_samples", int, default=32, validate=at_least(1),
           doc="real samples of the run's data (its valid_subset, else dev/test/train) on which the exported "
               "model is compared with the PyTorch model, in batches of several sizes and lengths"),
    Option("parity_data_dir", str, default=None, path="input",
           doc="x-prepro output to draw the parity samples from; null: the run's data_dir"),
]


class ExportCommand(Command):
    """An export of one run: subclasses set ``name`` and implement :meth:`export`."""

    group = "export"
    output_key = "out_dir"
    extra_options: list[Any] = []

    def options(self) -> list[Any]:
        return list(RUN_OPTIONS) + list(self.extra_options) + list(PARITY_OPTIONS)

    def outputs(self, args: Args) -> list[Output]:
        return [Output(out.key, out.path, out.kind, legacy=self.wrote_before) for out in super().outputs(args)]

    def inputs(self, args: Args) -> list[tuple[str, str]]:
        given = [("checkpoint", args.checkpoint)] if "<" not in args.checkpoint else []  # <best>: in save_dir
        return super().inputs(args) + given

    def wrote_before(self, out_dir: str) -> bool:
        """An out_dir this export wrote before XDPX kept records: its export.json names this export's format."""
        try:
            with io.open(io.join(out_dir, EXPORT_INFO)) as f:
                written = json.load(f).get("format")
        except (OSError, ValueError, AttributeError):  # no export.json, or not one of ours
            return False
        return EXPORT_FORMATS.get(written) == self.name

    def run(self, args: Args, dry: bool = False) -> None:
        if dry:
            return
        # lazy: the run-loading side (models, checkpoints); every command's --help imports this module
        from xdpx.export.loading import load_run
        from xdpx.export.parity import ParityError, real_samples  # lazy: loads numpy

        run = load_run(args.save_dir, args.checkpoint, trust_user_dir=args.trust_user_dir,
                       user_dir=args.get("user_dir"))
        samples = real_samples(run.args, args.parity_samples, args.parity_data_dir)
        try:
            self.export(args, run, samples)
        except ParityError as e:
            raise UserError(f"the export in {args.out_dir} failed its parity check: {e}") from e

    def export(self, args: Args, run: Any, samples: list[dict[str, Any]]) -> None:
        raise NotImplementedError
