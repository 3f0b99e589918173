"""x-eval: the numbers of valid.log.tsv, raw files, save_to_file, config mode, and the errors a user sees."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from inference_helpers import SAMPLE, write_json

from xdpx.cli import run_chain

DEV_TXT = str(SAMPLE / "reviews/dev.txt")


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def x_eval(tmp_path: Path, name: str = "eval.hjson", **config: object) -> int:
    return run_chain(["x-eval", str(write_json(tmp_path / name, config))])


def best_row(run: Path) -> dict[str, str]:
    rows = read_tsv(run / "valid.log.tsv")
    best_step = rows[-1]["best_step"]
    return next(r for r in rows if r["step"] == best_step)


METRIC_COLUMNS = ("loss", "accuracy", "auc", "f1", "precision", "recall", "macro_f1", "macro_precision",
                  "macro_recall", "micro_f1", "micro_precision", "micro_recall")


def test_eval_on_dev_with_best_equals_the_best_row_of_valid_log(cnn_run: Path, tmp_path: Path) -> None:
    best = best_row(cnn_run)
    rows = read_tsv(cnn_run / "valid.log.tsv")
    assert best is not rows[-1] and best["step"] != rows[-1]["step"], "the fixture run should end past its best"
    out = tmp_path / "scores.tsv"
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", checkpoint=f"{cnn_run}/<best>",
                  save_to_file=str(out)) == 0
    [row] = read_tsv(out)
    assert row["checkpoint"].endswith(f"checkpoint-{best['step']}.pt")
    for column in METRIC_COLUMNS:
        assert row[column] == best[column], column
    # the default checkpoint of save_dir mode is <best>
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out), save_mode="w") == 0
    [default] = read_tsv(out)
    assert default == row


def test_eval_of_last_equals_the_last_row(cnn_run: Path, tmp_path: Path) -> None:
    last = read_tsv(cnn_run / "valid.log.tsv")[-1]
    out = tmp_path / "scores.tsv"
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", checkpoint=f"{cnn_run}/<last>",
                  save_to_file=str(out)) == 0
    [row] = read_tsv(out)
    assert [row[c] for c in METRIC_COLUMNS] == [last[c] for c in METRIC_COLUMNS]


def test_raw_file_scores_like_its_split_and_save_mode(cnn_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.tsv"
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset=["dev", DEV_TXT], save_to_file=str(out),
                  workers=2) == 0
    split, raw = read_tsv(out)
    assert (split["subset"], raw["subset"]) == ("dev", DEV_TXT)
    assert split["samples"] == raw["samples"] == "60"
    assert [split[c] for c in METRIC_COLUMNS] == [raw[c] for c in METRIC_COLUMNS]
    # save_mode 'a' (the default) adds rows under the same header; 'w' replaces the file
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out)) == 0
    assert len(read_tsv(out)) == 3
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out), save_mode="w") == 0
    assert len(read_tsv(out)) == 1
    out.write_text("a\tb\n1\t2\n")
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out)) == 1
    assert out.read_text() == "a\tb\n1\t2\n"


def test_max_eval_steps_evaluates_the_first_batches(cnn_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.tsv"
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out), max_eval_steps=1,
                  batch_size=60) == 0
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out)) == 0
    one_batch_of_all, default = read_tsv(out)
    assert one_batch_of_all["accuracy"] == default["accuracy"]
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out), max_eval_steps=1,
                  batch_size=10) == 0
    assert float(read_tsv(out)[-1]["loss"]) != float(default["loss"])


def test_config_mode_evaluates_the_initial_model(cnn_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.tsv"
    train_config = str(cnn_run.parent / "train.hjson")
    for _ in range(2):
        assert x_eval(tmp_path, config=train_config, valid_subset="dev", save_to_file=str(out), seed=3) == 0
    first, second = read_tsv(out)
    assert first["checkpoint"] == "(initial)"
    assert first == second  # seeded: the same random baseline twice
    assert x_eval(tmp_path, config=train_config, valid_subset="dev", save_to_file=str(out), seed=4) == 0
    assert read_tsv(out)[-1]["loss"] != first["loss"]
    # a checkpoint given in config mode is loaded into the config's model
    assert x_eval(tmp_path, config=train_config, valid_subset="dev", save_to_file=str(out),
                  checkpoint=f"{cnn_run}/<best>") == 0
    assert read_tsv(out)[-1]["accuracy"] == best_row(cnn_run)["accuracy"]


def test_extra_config_overrides_the_loss(cnn_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "scores.tsv"
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", save_to_file=str(out),
                  extra_config={"loss": "label_smooth_ce", "label_smoothing": 0.5}) == 0
    [row] = read_tsv(out)
    best = best_row(cnn_run)
    assert row["accuracy"] == best["accuracy"]  # same predictions, another loss
    assert row["loss"] != best["loss"]


def test_config_errors_name_the_key(cnn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", extra_config={"kernel_size": 3}) == 2
    err = capsys.readouterr().err
    assert "extra_config" in err and "'kernel_size'" in err and "kernel_sizes" in err
    assert x_eval(tmp_path, save_dir=str(cnn_run), config=str(cnn_run.parent / "train.hjson"),
                  valid_subset="dev") == 2
    assert "exactly one of save_dir" in capsys.readouterr().err
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="nope") == 2
    err = capsys.readouterr().err
    assert "'nope'" in err and "available: dev, test, train" in err
    assert x_eval(tmp_path, save_dir=str(tmp_path), valid_subset="dev") == 2
    assert "not a run directory" in capsys.readouterr().err


def test_dry_checks_and_loads_nothing(cnn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "scores.tsv"
    config = write_json(tmp_path / "eval.hjson", {"save_dir": str(cnn_run), "valid_subset": ["dev", DEV_TXT],
                                                  "save_to_file": str(out)})
    assert run_chain(["x-eval", str(config), "--dry"]) == 0
    printed = capsys.readouterr().out
    assert "dev (split)" in printed and "(TextSource)" in printed and "loaded" not in printed
    assert not out.exists()


def test_weights_that_do_not_fit_are_reported(cnn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from xdpx.models.checkpoints import load_weights, save_torch

    weights = load_weights(f"{cnn_run}/<best>")
    weights.pop("classifier.bias")
    weights["extra.weight"] = weights["classifier.weight"]
    save_torch(weights, str(tmp_path / "odd.pt"))
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset="dev", checkpoint=str(tmp_path / "odd.pt")) == 1
    err = capsys.readouterr().err
    assert "missing keys ['classifier.bias']" in err and "unexpected keys ['extra.weight']" in err
    # pretrained weights for a config are loaded with the report, not refused
    assert x_eval(tmp_path, config=str(cnn_run.parent / "train.hjson"), valid_subset="dev",
                  checkpoint=str(tmp_path / "odd.pt")) == 0
    out = capsys.readouterr().out
    assert "missing keys (left as initialised): ['classifier.bias']" in out and "unexpected keys (not used): ['extra.weight']" in out


def test_bad_raw_lines_name_file_and_line(cnn_run: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    lines = Path(DEV_TXT).read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "bad.txt"
    bad.write_text("\n".join(lines[:5] + ["a text\tnot-a-label"] + lines[5:]) + "\n", encoding="utf-8")
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset=str(bad)) == 1
    err = capsys.readouterr().err
    assert f"{bad}:6" in err and "not-a-label" in err and "skip_bad_lines" in err
    out = tmp_path / "scores.tsv"
    assert x_eval(tmp_path, save_dir=str(cnn_run), valid_subset=[str(bad), "dev"], skip_bad_lines=True,
                  save_to_file=str(out)) == 0
    skipped, dev = read_tsv(out)
    assert skipped["samples"] == "60" and [skipped[c] for c in METRIC_COLUMNS] == [dev[c] for c in METRIC_COLUMNS]
    assert "skipped 1 bad line" in capsys.readouterr().out


def test_bert_run_raw_file_and_split_equal_valid_log(prepared, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A tiny BERT classifier: WordPiece on raw text at inference equals x-prepro's, and the trainer's numbers."""
    from inference_helpers import train_run

    run = train_run(tmp_path, prepared("reviews_bert"), model="bert_classification", pretrained_model=None,
                    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                    embedding_dim=..., num_filters=..., kernel_sizes=..., dropout=..., max_epoch=..., max_update=4,
                    eval_interval=-1, learning_rate=1e-4)
    out = tmp_path / "scores.tsv"
    assert x_eval(tmp_path, save_dir=str(run), valid_subset=["dev", DEV_TXT], save_to_file=str(out)) == 0
    split, raw = read_tsv(out)
    last = read_tsv(run / "valid.log.tsv")[-1]
    assert [split[c] for c in METRIC_COLUMNS] == [last[c] for c in METRIC_COLUMNS] == [raw[c] for c in METRIC_COLUMNS]


def test_command_modules_import_no_torch() -> None:
    """x-eval and x-pred are loaded with every command (x-train --dry too): they must stay light."""
    import subprocess
    import sys

    code = ("import sys; from xdpx.command import commands; commands.get('x-eval'); commands.get('x-pred'); "
            "import xdpx.serve.command, xdpx.inference.options; "
            "print(sorted(m for m in ('torch', 'numpy', 'sqlalchemy', 'pyarrow') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
