"""x-viz: runs of different batch sizes aligned by samples seen, epoch lines, best points, the figures,
plotting during training (and its failures), the gradient inspector and TensorBoard event files."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from viz_helpers import pixels_of_color, png_pixels, read_rows, train

from xdpx.cli import run_chain
from xdpx.viz.align import Axis
from xdpx.viz.plots import BEST_COLOR, COLORS, EPOCH_COLOR, plot_metric
from xdpx.viz.runs import Run, read_run


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def x_viz(tmp_path: Path, **config) -> int:
    path = tmp_path / "viz.hjson"
    path.write_text(json.dumps(config))
    return run_chain(["x-viz", str(path)])


def test_reference_run_with_twice_the_batch_is_drawn_at_twice_its_step(two_runs):
    bs16, bs32 = (read_run(str(p)) for p in two_runs)
    assert bs16.update_size == 16 and bs32.update_size == 32
    axis = Axis(bs16)
    # the main run at its own updates; the reference where it had seen as many samples
    assert list(axis.x(bs16, bs16.valid)) == [float(r["step"]) for r in bs16.valid]
    ref_x = axis.x(bs32, bs32.valid)
    assert np.allclose(ref_x, [r["samples"] / 16 for r in bs32.valid])
    # each full reference update (32 samples) spans two main updates; its short one (16 samples) one
    rows, xs = bs32.train, axis.x(bs32, bs32.train)  # a row per update
    spans = {rows[i]["samples"] - rows[i - 1]["samples"]: xs[i] - xs[i - 1] for i in range(1, len(rows))}
    assert spans == {32: 2.0, 16: 1.0} or spans == {32: 2.0}
    assert xs[-1] == 480 / 16 == bs16.valid[-1]["step"]  # both end at 480 samples, at the same x
    assert "updates of bs16 (16 samples each)" == axis.label


def test_epoch_ends_are_marked_in_samples_and_shard_ends_follow_the_shuffled_order():
    run = Run("r", "r", {"data_size": {"train": 240, "dev": 60}, "train_subset": "train"}, [], [])
    assert run.epoch_boundaries(720) == [(240, True), (480, True), (720, True)]
    from xdpx.runtime.seeding import epoch_rng

    shards = Run("s", "s", {"data_size": {"train0": 100, "train1": 50, "dev": 9}, "train_subset": "train*",
                            "lazy_load": True, "seed": 3}, [], [])
    second = [[100, 50][i] for i in epoch_rng(3, 2, salt=1).permutation(2)]
    assert shards.epoch_boundaries(300) == [(100, False), (150, True), (150 + second[0], False), (300, True)]


def test_best_point_follows_the_metric_direction():
    rows = [{"step": 1, "samples": 8, "loss": 0.9, "accuracy": 0.6}, {"step": 2, "samples": 16, "loss": 0.5,
            "accuracy": 0.7}, {"step": 3, "samples": 24, "loss": 0.7, "accuracy": 0.8}]
    run = Run("r", "r", {"major_metric": "accuracy", "ascending_metric": True}, [], rows)
    assert run.best("accuracy") == (3, 0.8) and run.best("loss") == (2, 0.5)
    inverted = Run("r", "r", {"major_metric": "error_rate_custom", "ascending_metric": False}, [],
                   [{"step": 1, "samples": 1, "error_rate_custom": 0.3}, {"step": 2, "samples": 2,
                                                                          "error_rate_custom": 0.2}])
    assert inverted.best("error_rate_custom") == (2, 0.2)


def test_x_viz_draws_every_figure_with_the_reference(two_runs, tmp_path):
    bs16, bs32 = two_runs
    assert x_viz(tmp_path, save_dir=str(bs16), label="batch 16", ref_dir={"batch 32": str(bs32)}) == 0
    plots = bs16 / "plots"
    names = {p.name for p in plots.glob("*.png")}
    assert {"loss.png", "accuracy.png", "auc.png", "f1.png", "lr.png", "grad_norm.png", "clip_rate.png"} <= names
    assert "loss_scale.png" not in names  # no fp16: nothing to draw
    width, height = png_size(plots / "accuracy.png")
    assert (width, height) == (1050, 520)
    assert not (bs32 / "plots").exists()  # references are read, never written
    # what each picture holds: both runs' curves (valid: opaque; train-only figures: alpha 0.9)
    for name, alpha in (("accuracy.png", 1.0), ("loss.png", 1.0), ("lr.png", 0.9)):
        pixels = png_pixels(plots / name)
        assert pixels.shape == (520, 1050, 3) and pixels.std() > 0.05, name  # not blank
        plot = pixels[87:465, 80:782]  # inside the axes (plots.py's margins), not the legend's samples
        main = pixels_of_color(plot, COLORS[0], alpha=alpha)
        reference = pixels_of_color(plot, COLORS[1], alpha=alpha)
        assert main > 40 and reference > 20, (name, main, reference)
        assert pixels_of_color(pixels, COLORS[2]) == 0, name  # two runs: no third series
    # the main run's two epoch ends: vertical light-red lines (EPOCH_COLOR half transparent) across the plot
    pixels = png_pixels(plots / "accuracy.png")
    red = (pixels[..., 0] - pixels[..., 1] > 0.15) & (np.abs(pixels[..., 1] - pixels[..., 2]) < 0.03)
    columns = np.flatnonzero(red.sum(axis=0) > 0.6 * 520 * (0.835 - 0.105))  # most of the axes' height
    assert len(columns) and 1 + int((np.diff(columns) > 1).sum()) == 2, columns


def test_each_figure_draws_one_series_per_run_and_column(two_runs):
    runs = [read_run(str(p)) for p in two_runs]
    axis = Axis(runs[0])

    def lines(figure):
        ax = figure.axes[0]
        drawn = [line for line in ax.lines if len(line.get_xdata()) > 1 and line.get_linestyle() != "None"]
        return {(to_hex(line.get_color()), line.get_linestyle()): len(line.get_xdata()) for line in drawn
                if to_hex(line.get_color()) != EPOCH_COLOR}

    from matplotlib.colors import to_hex

    loss = plot_metric(axis, runs, "loss", "loss", "loss", "loss")
    valid16, valid32 = (len(r.valid) for r in runs)
    train16, train32 = (len([r for r in run.train if "loss" in r]) for run in runs)
    assert lines(loss) == {(COLORS[0], "-"): valid16, (COLORS[1], "-"): valid32,
                           (COLORS[0], "--"): train16, (COLORS[1], "--"): train32}
    best_dots = [line for line in loss.axes[0].lines if to_hex(line.get_color()) == BEST_COLOR]
    assert len(best_dots) == 2  # each run's best evaluation
    epochs = [line for line in loss.axes[0].lines if to_hex(line.get_color()) == EPOCH_COLOR]
    assert len(epochs) == 2  # the main run's two epoch ends
    accuracy = plot_metric(axis, runs, None, "accuracy", "accuracy", "accuracy")
    assert lines(accuracy) == {(COLORS[0], "-"): valid16, (COLORS[1], "-"): valid32}
    assert plot_metric(axis, runs, "no_such_column", None, "x", "x") is None  # nothing to draw: no figure


def test_x_viz_glob_plots_each_run_and_svg_works(two_runs, tmp_path):
    root = two_runs[0].parent
    assert x_viz(tmp_path, save_dir=str(root / "bs*"), figext="svg", walltime=True) == 0
    for run in two_runs:
        assert (run / "plots" / "loss.svg").read_text().lstrip().startswith("<?xml")


def test_x_viz_on_a_folder_that_is_not_a_run_says_so(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    assert x_viz(tmp_path, save_dir=str(tmp_path / "empty")) == 1
    assert "is not an x-train run directory (no args.py)" in capsys.readouterr().err
    assert x_viz(tmp_path, save_dir=str(tmp_path / "nothing*")) == 1
    assert "matches no run directory" in capsys.readouterr().err


def test_x_viz_checks_the_references_before_drawing(two_runs, tmp_path, capsys):
    assert x_viz(tmp_path, save_dir=str(two_runs[0]), ref_dir={"old": str(tmp_path / "gone")}) == 1
    assert f"ref_dir: {tmp_path / 'gone'} is not a run directory" in capsys.readouterr().err


def test_training_draws_the_plots_and_survives_a_plotting_failure(reviews, tmp_path, monkeypatch):
    code, run = train(tmp_path, reviews, "short", viz=True, max_epoch=1)
    assert code == 0 and not (run / "plots").exists()  # a run of seconds: not worth the drawing time
    code, run = train(tmp_path, reviews, "run", viz=True, viz_min_interval=0, max_epoch=1, eval_interval=-1)
    assert code == 0 and (run / "plots" / "accuracy.png").exists()

    def broken(*args, **kwargs):
        raise RuntimeError("no room for figures")

    monkeypatch.setattr("xdpx.viz.plots.plot_runs", broken)
    code, run = train(tmp_path, reviews, "broken", viz=True, viz_min_interval=0, max_epoch=1, eval_interval=-1)
    assert code == 0
    assert "viz: drawing the plots failed (RuntimeError: no room for figures); training goes on" in \
        (run / "log.txt").read_text()
    assert len(read_rows(run / "valid.log.tsv")) == 1 and "| done: " in (run / "log.txt").read_text()


def test_inspect_gradient_draws_one_row_per_parameter_at_every_evaluation(reviews, tmp_path):
    code, run = train(tmp_path, reviews, "run", inspect_gradient=True, max_epoch=1, eval_interval=5)
    assert code == 0
    gradients = run / "plots" / "gradients"
    assert sorted(p.name for p in gradients.glob("*.png")) == ["10.png", "15.png", "5.png"]
    parameters = 1 + 2 * 2 + 2  # embedding, two convolutions (weight, bias), output layer (weight, bias)
    assert png_size(gradients / "5.png") == (1000, int((1.6 + 0.28 * parameters) * 100))


def test_tensorboard_event_files_mirror_the_logs(reviews, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    code, run = train(tmp_path, reviews, "run", tensorboard=True, max_epoch=1)
    assert code == 0
    events = EventAccumulator(str(run / "tensorboard"))
    events.Reload()
    train_loss = [(e.step, e.value) for e in events.Scalars("train/loss")]
    expected = [(int(r["step"]), float(r["loss"])) for r in read_rows(run / "train.log.tsv")]
    assert [s for s, _ in train_loss] == [s for s, _ in expected]
    assert np.allclose([v for _, v in train_loss], [v for _, v in expected], rtol=1e-5)
    accuracy = [(e.step, e.value) for e in events.Scalars("valid/accuracy")]
    assert accuracy == [(int(r["step"]), pytest.approx(float(r["accuracy"]))) for r in read_rows(run / "valid.log.tsv")]


def test_tensorboard_events_after_the_resumed_update_are_purged(reviews, tmp_path):
    """Killed at update 13 (last state at update 10, events logged up to 12), then resumed: the events of
    updates 11-12 written before the kill are dropped, so each step has one value, as in train.log.tsv."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from viz_helpers import write_train_config

    config = write_train_config(tmp_path / "train.hjson", reviews, tmp_path / "run", tensorboard=True, resume=True,
                                max_epoch=1, eval_interval=5, log_interval=2)
    runner = [sys.executable, str(Path(__file__).resolve().parents[1] / "train" / "kill_runner.py"), str(config)]
    assert subprocess.run(runner + ["update", "13"], capture_output=True, timeout=300).returncode == -signal.SIGKILL
    before = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    before.Reload()
    assert [e.step for e in before.Scalars("train/loss")][-2:] == [10, 12]  # logged past the last state
    assert subprocess.run(runner + ["never", "0"], capture_output=True, timeout=300).returncode == 0
    events = EventAccumulator(str(tmp_path / "run" / "tensorboard"))
    events.Reload()
    rows = read_rows(tmp_path / "run" / "train.log.tsv")
    steps = [e.step for e in events.Scalars("train/loss")]
    assert steps == [int(r["step"]) for r in rows] == sorted(set(steps)) and 12 in steps
    assert np.allclose([e.value for e in events.Scalars("train/loss")], [float(r["loss"]) for r in rows], rtol=1e-5)
    assert [e.step for e in events.Scalars("valid/accuracy")] == [5, 10, 15]


def test_x_viz_reads_and_writes_a_remote_run_directory(two_runs, tmp_path):
    from xdpx import io

    remote = f"memory://viz-test-{tmp_path.name}"
    io.copytree(str(two_runs[1]), f"{remote}/bs32")
    assert x_viz(tmp_path, save_dir=f"{remote}/bs32", ref_dir=[str(two_runs[0])]) == 0
    names = io.listdir(f"{remote}/bs32/plots")
    assert "accuracy.png" in names and "loss.png" in names
    with io.open(f"{remote}/bs32/plots/accuracy.png", "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_fp16_run_gets_a_loss_scale_figure(reviews, tmp_path):
    code, run = train(tmp_path, reviews, "fp16", fp16=True, max_epoch=1, eval_interval=-1)
    assert code == 0
    assert x_viz(tmp_path, save_dir=str(run)) == 0
    scales = {float(r["loss_scale"]) for r in read_rows(run / "train.log.tsv")}
    assert scales and (run / "plots" / "loss_scale.png").exists()
