"""``x-script quantize SAVE_DIR --out OUT_DIR [--checkpoint CKPT] [--split dev] [--tolerance 1] [--onnx true]``:
an int8 model of a run that x-eval, x-pred and x-serve take like any run (docs/export.md, "int8 models").

OUT_DIR gets the run's args.py (its header says int8), vocabulary and labels, int8.json, the int8 weights
(model_int8.safetensors: Linear and LSTM layers run as dynamic int8 modules, embeddings stored int8) and,
with --onnx true (the default), model_int8.onnx (the ONNX export quantized by onnxruntime). Both are
evaluated on --split against the float32 model, as x-eval scores them; quantize.json beside the model holds
the two metrics, the difference, the largest probability difference and the sizes on disk. A model losing
more than --tolerance points of the run's major metric (100 points = a metric of 1) is refused: exit 2,
nothing written. The logic is :func:`xdpx.export.quantize.quantize_run`.
"""

from __future__ import annotations

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.io.ownership import Output, check_outputs
from xdpx.scripts.result_tables import split_flags

TOOL = "quantize"
USAGE = ("usage: x-script quantize SAVE_DIR --out OUT_DIR [--checkpoint CKPT] [--split dev] [--tolerance 1] "
         "[--onnx true]")


def parse(argv: list[str]) -> dict[str, object]:
    flags: dict[str, str | None] = {"out": None, "checkpoint": "<best>", "split": "dev", "tolerance": "1",
                                    "onnx": "true"}
    positional, values = split_flags(argv, flags, USAGE)
    if len(positional) != 1 or not values["out"]:
        raise ConfigError([f"give one SAVE_DIR and --out OUT_DIR. {USAGE}"])
    try:
        tolerance = float(values["tolerance"])  # type: ignore[arg-type]
    except ValueError:
        raise ConfigError([f"--tolerance {values['tolerance']!r}: not a number. {USAGE}"]) from None
    if values["onnx"] not in ("true", "false"):
        raise ConfigError([f"--onnx {values['onnx']!r}: true or false. {USAGE}"])
    return {"run_dir": positional[0], "out_dir": str(values["out"]), "checkpoint": values["checkpoint"],
            "split": values["split"], "tolerance": tolerance, "onnx": values["onnx"] == "true"}


@script(TOOL)
def main(argv: list[str]) -> int:
    """Turn a run's checkpoint into an int8 model (torch and ONNX) measured against float32 on a split.

    x-eval, x-pred and x-serve take OUT_DIR like a run (backend torch or onnx); a model losing more than
    --tolerance points of the major metric is refused with what was measured, and nothing is written."""
    # lazy: torch, the ONNX exporter and onnxruntime stay out of x-script's start-up
    from xdpx.export.quantize import check_source, check_tolerance, quantize_run

    options = parse(argv)
    check_tolerance(float(options["tolerance"]))  # type: ignore[arg-type]
    check_source(str(options["run_dir"]))
    problems = check_outputs(f"x-script {TOOL}", [Output("out", str(options["out_dir"]), kind="folder")],
                             [("save_dir", str(options["run_dir"]))], lambda _key: f"x-script {TOOL}")
    if problems:
        raise ConfigError(problems)
    report = quantize_run(**options)  # type: ignore[arg-type]
    out = options["out_dir"]
    print(f"wrote the int8 model {out} (backend {report['backend']} by default); measured: {io.join(str(out), 'quantize.json')}")
    return 0
