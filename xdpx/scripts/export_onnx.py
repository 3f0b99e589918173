"""``x-script export_onnx config.hjson``: an ONNX model.onnx with dynamic batch and sequence axes, with
vocab and labels, checked with onnxruntime against the eager model (docs/export.md)."""

from __future__ import annotations

from typing import Any

from xdpx.chain import script_main
from xdpx.command import commands, script
from xdpx.config.options import Args, Option
from xdpx.config.ranges import at_least
from xdpx.export.command import ExportCommand
from xdpx.export.companions import write_companions

NAME = "export_onnx"


@commands.register(NAME)
class ExportOnnx(ExportCommand):
    """Export the run's model to ONNX (out_dir/model.onnx) and check it with onnxruntime."""

    name = NAME
    extra_options = [
        Option("opset_version", int, default=None, validate=at_least(7),
               doc="ONNX opset to target; null: the exporter's default (recent onnxruntime runs it)"),
    ]

    def export(self, args: Args, run: Any, samples: list[dict[str, Any]]) -> None:
        # lazy: export.onnx imports torch; x-prepro and every --help load this command without it
        from xdpx.export.onnx import export_onnx, output_names

        path, report, inputs = export_onnx(run, args.out_dir, samples, args.opset_version)
        write_companions(run, args.out_dir, {"format": "onnx", "file": "model.onnx", "inputs": inputs,
                                             "outputs": output_names(run.model, run.processor.collate(samples[:2])["net_input"]),
                                             "dynamic_axes": "batch, sequence",
                                             "parity": report.describe()})
        print(f"wrote {path}; parity with the eager model (onnxruntime): {report.describe()}")


@script(NAME)
def main(argv: list[str]) -> int:
    """Export a run to ONNX with dynamic axes: x-script export_onnx config.hjson (save_dir, checkpoint, out_dir)."""
    return script_main(NAME, argv)
