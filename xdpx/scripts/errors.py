"""``x-script errors SAVE_DIR OUT [--split dev] [--top 20] [--attributions auto] [--checkpoint PATH]
[--batch-size N]``: the errors that matter on a labelled split of a classifier run.

The split (a split name of the run's data_dir, or a labelled raw file or table in the training format)
is predicted with the run's best checkpoint (or ``--checkpoint``), with the run's calibrated
probabilities when it has a calibration.json for that checkpoint (x-script calibrate). The folder OUT
gets (xdpx/scripts/error_report.py):

- ``mistakes.tsv``: the ``--top`` wrong predictions the model was surest of (rank, index in the split,
  probability of the predicted label, of the gold one, gold, predicted, text) and, with
  ``--attributions`` (``auto``: when captum is installed; ``on``; ``off``), each one's token attributions
  for the wrong label (Integrated Gradients, xdpx/inference/explain.py: ``word:score`` pairs; a pair's
  second text after `` ||| ``), in the input's own words for a raw file, in the tokens for a split of
  data_dir; the HTML page shades the words by them;
- ``confused_pairs.tsv``: (gold, predicted) pairs by count, with the share of the gold label's samples;
- ``per_label.tsv``: precision, recall, F1, support and predicted count of every label;
- ``errors.html``: the same for people, one self-contained page.

A split that does not exist or has no labels, or a run that is not a single-label classifier: one line,
exit 2, nothing written.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.io.ownership import Output, check_outputs, claim
from xdpx.scripts.result_tables import number_flag, split_flags

USAGE = ("usage: x-script errors SAVE_DIR OUT [--split dev] [--top 20] [--attributions auto] [--checkpoint PATH] "
         "[--batch-size N]")
ATTRIBUTIONS = ("auto", "on", "off")


def want_attributions(choice: str) -> bool:
    """``--attributions``: on, off, or auto (on when the optional package captum is installed)."""
    if choice not in ATTRIBUTIONS:
        raise ConfigError([f"--attributions {choice!r}: one of {', '.join(ATTRIBUTIONS)}. {USAGE}"])
    if choice == "auto":
        return importlib.util.find_spec("captum") is not None
    return choice == "on"


def mistake_attributions(loaded: Any, outputs: Any, mistakes: list[Any]) -> list[list[tuple[str, float]]]:
    """Per mistake the (word, score) attributions of its predicted label; a pair's two texts joined by a
    ``|||`` word of score 0."""
    from xdpx.inference.explain import explain_samples  # lazy: captum and the gradients, only when asked

    explained = explain_samples(loaded, [outputs.samples[m.index] for m in mistakes],
                                [outputs.raw_texts[m.index] for m in mistakes])
    out = []
    for explanations in explained:
        texts = explanations[0].tokens if explanations else []
        joined: list[tuple[str, float]] = []
        for number, tokens in enumerate(texts):
            joined += ([("|||", 0.0)] if number else []) + [(word, float(score)) for word, score in tokens]
        out.append(joined)
    return out
TOOL = "errors"


@script("errors")
def main(argv: list[str]) -> int:
    """The most confident mistakes, the most confused label pairs and per-label scores of a split: TSV + HTML."""
    # lazy: x-script --help (and every command's --help) imports each tool; these load the inference stack
    from xdpx.inference.calibration import calibrates, class_probabilities, run_temperature
    from xdpx.metrics.calibration import expected_calibration_error  # lazy: as above
    from xdpx.scripts import error_report as report  # lazy: as above
    from xdpx.scripts.error_analysis import (  # lazy: as above
        confused_pairs,
        confusion_counts,
        most_confident_mistakes,
        per_label_scores,
    )
    from xdpx.scripts.labelled_split import load_run, predict_split  # lazy: as above

    positional, flags = split_flags(argv, {"split": "dev", "top": "20", "attributions": "auto", "checkpoint": None,
                                           "batch_size": None}, USAGE)
    if len(positional) != 2:
        raise ConfigError([USAGE])
    save_dir, out = positional[0].rstrip("/") or "/", positional[1]
    top = number_flag(flags, "top", USAGE, low=0)
    if top != int(top):
        raise ConfigError([f"--top {flags['top']}: a whole number. {USAGE}"])
    batch_size = int(number_flag(flags, "batch_size", USAGE, low=0)) if flags["batch_size"] is not None else None
    explain = want_attributions(str(flags["attributions"]))
    problems = check_outputs(TOOL, [Output("OUT", out, "folder")], [("SAVE_DIR", save_dir)], lambda _k: f"x-script {TOOL}")
    if problems:
        raise ConfigError(problems)
    split = str(flags["split"])
    args, loaded = load_run(save_dir, flags["checkpoint"], batch_size, TOOL)
    if not calibrates(loaded):
        raise ConfigError(f"x-script errors: {save_dir} is not a single-label classifier (task {loaded.run_args.task}, "
                          f"loss {loaded.run_args.loss}): its predictions are not one label per sample; nothing written")
    labels = list(loaded.processor.target_map.labels)
    outputs = predict_split(loaded, args, split, TOOL)
    temperature = run_temperature(save_dir, loaded)
    probabilities = class_probabilities(outputs.logits, temperature or 1.0)
    predicted = probabilities.argmax(axis=1)
    counts = confusion_counts(predicted, outputs.targets, len(labels))
    mistakes = most_confident_mistakes(probabilities, outputs.targets, outputs.texts, labels, int(top))
    pairs = confused_pairs(counts, labels, max(int(top), 10))
    scores = per_label_scores(counts, labels)
    attributions = mistake_attributions(loaded, outputs, mistakes) if explain and mistakes else None
    accuracy = float(np.trace(counts) / max(len(outputs.targets), 1))
    facts = {"run": save_dir, "checkpoint": io.basename(str(loaded.checkpoint)), "split": split,
             "samples": len(outputs.targets), "accuracy": f"{accuracy:.4f}",
             "mistakes": int(len(outputs.targets) - np.trace(counts)),
             "probabilities": f"calibrated (temperature {temperature:.4g})" if temperature else "raw (no calibration.json "
                              "for this checkpoint)",
             "ECE (15 bins)": f"{expected_calibration_error(probabilities, outputs.targets):.4f}"}
    io.makedirs(out)
    if attributions is not None:
        facts["attributions"] = "Integrated Gradients of the predicted label (green: for it, red: against)"
    files = {report.MISTAKES_FILE: report.mistakes_tsv(mistakes, attributions), report.PAIRS_FILE: report.pairs_tsv(pairs),
             report.LABELS_FILE: report.labels_tsv(scores),
             report.HTML_FILE: report.summary_html(f"Errors of {io.basename(save_dir)} on {split}", facts, mistakes,
                                                   pairs, scores, attributions)}
    for name, text in files.items():
        with io.open(io.join(out, name), "w") as f:
            f.write(text)
    claim(TOOL, out)
    print(f"x-script errors {save_dir} on {split}: {len(outputs.targets)} samples, accuracy {accuracy:.4f}, "
          f"{facts['mistakes']} mistakes; probabilities {facts['probabilities']}")
    for pair in pairs[:5]:
        print(f"  {pair.gold} -> {pair.predicted}: {pair.count} ({pair.share:.1%} of {pair.gold})")
    print(f"wrote {', '.join(files)} to {out}")
    return 0
