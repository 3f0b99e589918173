"""``x-script export_torchscript config.hjson``: a TorchScript model.pt with vocab and labels, checked
against the eager model on real samples (docs/export.md)."""

from __future__ import annotations

from typing import Any

from xdpx.chain import script_main
from xdpx.command import commands, script
from xdpx.config.options import Args
from xdpx.export.command import ExportCommand
from xdpx.export.companions import write_companions

NAME = "export_torchscript"


@commands.register(NAME)
class ExportTorchscript(ExportCommand):
    """Trace the run's model to TorchScript (out_dir/model.pt) and check it at several input shapes."""

    name = NAME

    def export(self, args: Args, run: Any, samples: list[dict[str, Any]]) -> None:
        # lazy: export.torchscript imports torch; x-prepro and every --help load this command without it
        from xdpx.export.torchscript import export_torchscript

        path, report, inputs = export_torchscript(run, args.out_dir, samples)
        write_companions(run, args.out_dir, {"format": "torchscript", "file": "model.pt", "inputs": inputs,
                                             "call": f"torch.jit.load('model.pt')({', '.join(inputs)})",
                                             "parity": report.describe()})
        print(f"wrote {path}; parity with the eager model: {report.describe()}")


@script(NAME)
def main(argv: list[str]) -> int:
    """Export a run to TorchScript: x-script export_torchscript config.hjson (save_dir, checkpoint, out_dir)."""
    return script_main(NAME, argv)
