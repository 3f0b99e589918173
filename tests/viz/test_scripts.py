"""x-script aggregate_results, diff_params, clean_checkpoints and profile on real run directories."""

from __future__ import annotations

import json
import shutil

from viz_helpers import read_rows, train, write_train_config

from xdpx.cli import x_script


def best_of(run, metric="accuracy", lower=False):
    rows = [(float(r[metric]), int(r["step"])) for r in read_rows(run / "valid.log.tsv")]
    value = min(rows, key=lambda v: (v[0], v[1]))[0] if lower else max(rows, key=lambda v: (v[0], -v[1]))[0]
    return value, min(step for v, step in rows if v == value)


def test_aggregate_results_one_row_per_run_with_best_score_and_status(two_runs, tmp_path, capsys):
    root = tmp_path / "root"
    shutil.copytree(two_runs[0].parent, root, ignore=shutil.ignore_patterns("*.pt", "plots"))
    # a run still in progress: its log does not end with "done"
    log = root / "bs32" / "log.txt"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:-1]))
    assert x_script(["aggregate_results", str(root)]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    assert lines[0] == ["run", "metric", "best", "best_step", "last_step", "status"]
    rows = {row[0].rsplit("/", 1)[-1]: row for row in lines[1:]}
    assert set(rows) == {"bs16", "bs32"}
    for name in rows:
        value, step = best_of(root / name)
        assert rows[name][1:5] == ["accuracy", f"{value:.6g}", str(step), "30" if name == "bs16" else "16"]
    assert rows["bs16"][5] == "done" and rows["bs32"][5] == "in progress"

    assert x_script(["aggregate_results", str(root), "-bs3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2 and lines[1].startswith(str(root / "bs32"))


def test_aggregate_results_full_adds_speed_and_differing_hyperparameters_sorted_by_score(two_runs, capsys):
    assert x_script(["aggregate_results", str(two_runs[0].parent), "--full"]) == 0
    lines = [line.split("\t") for line in capsys.readouterr().out.splitlines()]
    header = lines[0]
    assert header[6:] == ["samples_per_s", "batch_size", "eval_interval", "log_interval", "valid_batch_size"]
    scores = [float(row[2]) for row in lines[1:]]
    assert scores == sorted(scores, reverse=True)
    by_run = {row[0].rsplit("/", 1)[-1]: dict(zip(header, row)) for row in lines[1:]}
    assert by_run["bs16"]["batch_size"] == "16" and by_run["bs32"]["batch_size"] == "32"
    assert float(by_run["bs16"]["samples_per_s"]) > 0


def test_diff_params_between_two_runs_and_a_run_and_a_config(two_runs, reviews, tmp_path, capsys):
    bs16, bs32 = two_runs
    assert x_script(["diff_params", str(bs16), str(bs32)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# 5 option(s) differ")
    assert any(line.split() == ["batch_size", "16", "->", "32"] for line in out)
    # a config resolved as x-train would: the same run's options, except what the config changes
    config = write_train_config(tmp_path / "next.hjson", reviews, bs16, batch_size=16, eval_interval=6,
                                log_interval=2, max_epoch=2, learning_rate=0.01)
    assert x_script(["diff_params", str(bs16), str(config)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("# 1 option(s) differ") and out[1].split() == ["learning_rate", "0.003", "->", "0.01"]
    assert x_script(["diff_params", str(tmp_path / "missing")]) == 2


def test_clean_checkpoints_keeps_best_and_last_for_a_loss_metric(reviews, tmp_path, capsys):
    (tmp_path / "root").mkdir()
    code, run = train(tmp_path / "root", reviews, "loss_run", major_metric="loss", ascending_metric=False,
                      eval_interval=5, max_epoch=3, save_full_checkpoint=True, learning_rate=0.05, dropout=0.0)
    assert code == 0
    best_loss, best_step = best_of(run, "loss", lower=True)
    steps = sorted(int(p.stem.split("-")[1]) for p in run.glob("checkpoint-*.pt"))
    # the dev loss goes down, then up (overfitting): the best is in the middle, and is the lowest loss
    assert steps == list(range(5, 46, 5)) and best_step not in (5, 45)
    worst_step = best_of(run, "loss")[1]
    assert worst_step != best_step
    removed = [p for p in run.glob("*-*.pt") if int(p.stem.split("-")[1]) not in (best_step, 45)]
    removed_bytes = sum(p.stat().st_size for p in removed)

    assert x_script(["clean_checkpoints", str(tmp_path / "root"), "--dry"]) == 0
    assert f"would free {removed_bytes:,} bytes" in capsys.readouterr().out
    assert len(list(run.glob("checkpoint-*.pt"))) == 9

    assert x_script(["clean_checkpoints", str(tmp_path / "root")]) == 0
    out = capsys.readouterr().out
    assert f"freed {removed_bytes:,} bytes" in out
    assert sorted(p.name for p in run.glob("*.pt")) == sorted(
        [f"checkpoint-{best_step}.pt", "checkpoint-45.pt", f"state-{best_step}.pt", "state-45.pt", "state.pt"])
    assert json.loads((run / "checkpoints.json").read_text())["best"] == f"checkpoint-{best_step}.pt"


def test_profile_writes_a_chrome_trace_and_a_module_table(reviews, tmp_path, capsys):
    config = write_train_config(tmp_path / "p.hjson", reviews, tmp_path / "unused")
    out = tmp_path / "profile"
    assert x_script(["profile", str(config), "--steps", "3", "--out", str(out)]) == 0
    trace = json.loads((out / "trace.json").read_text())
    names = {event.get("name") for event in trace["traceEvents"]}
    assert {"module:(model)", "module:encoder.embedding", "module:encoder.convs.0", "module:classifier"} <= names
    rows = {line.split("\t")[0]: line.split("\t") for line in (out / "modules.tsv").read_text().splitlines()[1:]}
    assert rows["classifier"][1:3] == ["Linear", "3"] and rows["(model)"][2] == "3"
    assert float(rows["(model)"][3]) >= float(rows["encoder.convs.0"][3]) > 0
    assert "module:encoder.convs.0" not in capsys.readouterr().err
