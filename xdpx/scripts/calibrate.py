"""``x-script calibrate SAVE_DIR [--split dev] [--bins 15] [--checkpoint PATH] [--batch-size N]``: fit the
temperature that calibrates a classifier's probabilities on a labelled split, and keep it in the run.

The split (a split name of the run's data_dir, or a labelled raw file or table in the training format)
is predicted with the run's best checkpoint (or ``--checkpoint``); the temperature T that minimises the
negative log-likelihood of its gold labels under ``logits / T`` is fitted (xdpx/inference/calibration.py)
and written, with NLL, ECE, Brier score and the reliability bins before and after, to
SAVE_DIR/calibration.json (atomically; the file is this tool's own, replaced by the next calibration).
From then on x-eval, x-pred and x-serve use T for that checkpoint (``calibrated: false`` / ``--raw-probs``:
raw probabilities), and x-viz draws the reliability diagram. The predicted labels never change.

Refused with one line, exit 2, nothing written: a split that does not exist or has no labels, a run that
is not a single-label classifier, a temperature that would not be finite.
"""

from __future__ import annotations

import json

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.io.ownership import record as record_output
from xdpx.scripts.result_tables import check_writable, number_flag, split_flags

USAGE = "usage: x-script calibrate SAVE_DIR [--split dev] [--bins 15] [--checkpoint PATH] [--batch-size N]"


def bins_flag(flags: dict[str, str | None]) -> int:
    bins = number_flag(flags, "bins", USAGE, low=0)
    if bins != int(bins):
        raise ConfigError([f"--bins {flags['bins']}: a whole number of bins. {USAGE}"])
    return int(bins)


@script("calibrate")
def main(argv: list[str]) -> int:
    """Fit a temperature on a labelled split (NLL) and keep it in the run: calibrated probabilities."""
    # lazy: x-script --help (and every command's --help) imports each tool; these load the inference stack
    from xdpx.inference.calibration import (
        calibrates,
        check_temperature,
        class_probabilities,
        file_sha256,
        fit_temperature,
    )
    from xdpx.metrics.calibration import CALIBRATION_FILE, DEFAULT_BINS, calibration_scores  # lazy: as above
    from xdpx.scripts.labelled_split import load_run, predict_split  # lazy: as above

    positional, flags = split_flags(argv, {"split": "dev", "bins": str(DEFAULT_BINS), "checkpoint": None,
                                           "batch_size": None}, USAGE)
    if len(positional) != 1:
        raise ConfigError([USAGE])
    save_dir = positional[0].rstrip("/") or "/"
    num_bins = bins_flag(flags)
    batch_size = int(number_flag(flags, "batch_size", USAGE, low=0)) if flags["batch_size"] is not None else None
    out = io.join(save_dir, CALIBRATION_FILE)
    check_writable("calibrate", [("SAVE_DIR", out)], [])
    split = str(flags["split"])
    args, loaded = load_run(save_dir, flags["checkpoint"], batch_size, "calibrate")
    if not calibrates(loaded):
        raise ConfigError(f"x-script calibrate: {save_dir} is not a single-label classifier (task {loaded.run_args.task}, "
                          f"loss {loaded.run_args.loss}): temperature scaling applies to class probabilities "
                          "(docs/inference.md, Calibration); nothing written")
    outputs = predict_split(loaded, args, split, "calibrate")
    temperature = fit_temperature(outputs.logits, outputs.targets)
    check_temperature(temperature, split, save_dir)
    before = calibration_scores(class_probabilities(outputs.logits), outputs.targets, num_bins)
    after = calibration_scores(class_probabilities(outputs.logits, temperature), outputs.targets, num_bins)
    record = {"temperature": temperature, "split": split, "samples": len(outputs.targets), "num_bins": num_bins,
              "checkpoint": io.basename(str(loaded.checkpoint)), "checkpoint_sha256": file_sha256(str(loaded.checkpoint)),
              "labels": list(loaded.processor.target_map.labels), "before": before, "after": after}
    with io.open(out, "w") as f:  # atomic: a reader sees the old record or the new one
        json.dump(record, f, indent=1)
        f.write("\n")
    record_output("calibrate", out)
    print(f"x-script calibrate {save_dir} on {split} ({len(outputs.targets)} samples, {num_bins} bins): temperature "
          f"{temperature:.4f}")
    for name in ("nll", "ece", "brier", "accuracy"):
        print(f"  {name:<9} {before[name]:.4f} -> {after[name]:.4f}")
    print(f"wrote {out}")
    return 0
