"""Old configs: the original XDPX's misspelt eval_interval_warmup_mutiplier and its apex-era fp16 options."""

from __future__ import annotations

from train_helpers import write_config

from xdpx.cli import resolve_runs, run_chain


def test_the_manuals_spelling_of_the_warmup_multiplier_is_accepted(reviews, tmp_path):
    path = write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", eval_interval_warmup=20,
                        eval_interval_warmup_mutiplier=3)
    (args,) = resolve_runs("x-train", str(path))
    assert args.eval_interval_warmup_multiplier == 3


def test_apex_era_fp16_options_are_accepted_with_what_they_map_to(reviews, tmp_path, capsys):
    path = write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", fp16_backend="apex", opt_level="O2",
                        memory_efficient_fp16=True)
    assert run_chain(["x-train", str(path), "--dry"]) == 0
    out = capsys.readouterr().out
    assert "fp16_backend: apex -> torch autocast with XDPX's dynamic loss scaler" in out
    assert "opt_level: O2 -> trained like apex O1 (autocast, fp32 master weights); O2's fp16 weights are not" in out
    assert "memory_efficient_fp16: true -> no effect" in out


def test_a_wrong_legacy_value_names_the_key(reviews, tmp_path, capsys):
    path = write_config(tmp_path / "t.hjson", reviews, tmp_path / "run", opt_level="O4")
    assert run_chain(["x-train", str(path), "--dry"]) == 2
    assert "opt_level" in capsys.readouterr().err
