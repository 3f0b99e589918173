"""log.add_summary / log.add_accumulative_summary: columns of train.log.tsv and valid.log.tsv, names
first seen late, and exact resume with summaries in flight."""

from __future__ import annotations

import math

import pytest
from viz_helpers import PLANTED, read_rows, train

from xdpx.logger import SummaryLog, mode
from xdpx.train.logs import TsvLog

SUMMARY = {"user_dir": str(PLANTED), "model": "summary_cnn", "late_after_calls": 6, "max_epoch": 2,
           "log_interval": 4, "eval_interval": 10}


def test_summaries_become_columns_including_a_name_first_seen_late(reviews, tmp_path):
    code, run = train(tmp_path, reviews, "run", **SUMMARY)
    assert code == 0
    rows = read_rows(run / "train.log.tsv")
    header = (run / "train.log.tsv").read_text().splitlines()[0].split("\t")
    assert header[-3:] == ["logit_abs_mean", "batch_tokens", "late_norm"]
    assert [r["step"] for r in rows] == [str(s) for s in range(4, 31, 4)]
    # one forward per update: late_norm starts with the 7th call, i.e. in the row of update 8
    assert rows[0]["late_norm"] == "" and all(float(r["late_norm"]) > 0 for r in rows[1:])
    assert all(float(r["logit_abs_mean"]) > 0 for r in rows)
    # 16 reviews per batch, each at least 1 and at most max_len=200 characters
    assert all(16 <= float(r["batch_tokens"]) <= 16 * 200 for r in rows)
    valid = read_rows(run / "valid.log.tsv")
    assert [v["step"] for v in valid] == ["10", "20", "30"]
    # the accumulative summary's reduce_fn saw every batch of the 60 dev reviews (batches of 16)
    assert all(v["eval_batches"] == "4" for v in valid)
    assert all(0.0 <= float(v["margin_positive_rate"]) <= 1.0 for v in valid)


def test_resume_with_summaries_in_flight_writes_the_same_logs(reviews, tmp_path):
    code, reference = train(tmp_path, reviews, "reference", **SUMMARY)
    assert code == 0
    # pause at update 5: mid log interval, before 'late_norm' exists; the resumed run adds the column
    code, run = train(tmp_path, reviews, "run", **SUMMARY, resume=True, train_steps=5)
    assert code == 0 and "late_norm" not in (run / "train.log.tsv").read_text()
    code, run = train(tmp_path, reviews, "run", **SUMMARY, resume=True)
    assert code == 0

    def without_speed(path):
        return [{k: v for k, v in row.items() if k != "samples_per_s"} for row in read_rows(path)]

    assert without_speed(run / "train.log.tsv") == without_speed(reference / "train.log.tsv")
    assert (run / "valid.log.tsv").read_text() == (reference / "valid.log.tsv").read_text()


def test_summary_log_outside_training_does_nothing_and_rejects_matrices():
    import torch

    summaries = SummaryLog()
    summaries.add_summary("x", 1.0)  # no mode: x-pred, notebooks
    assert summaries.train_means() == {}
    with pytest.raises(ValueError, match=r"add_summary\('m', \.\.\.\): expected a scalar.*\(2, 2\)"):
        summaries.mode = "train"
        summaries.add_summary("m", torch.ones(2, 2))
    summaries.add_summary("x", torch.tensor(1.0))
    summaries.add_summary("x", 2.0)
    assert summaries.train_means() == {"x": 1.5} and summaries.train_means() == {}
    with mode("valid"):
        from xdpx.logger import log

        log.add_accumulative_summary("a", 3.0, reduce_fn=lambda vs: {"total": sum(vs)})
        log.add_accumulative_summary("a", 4.0, reduce_fn=lambda vs: {"total": sum(vs)})
        assert log.end_evaluation() == {"total": 7.0}
    assert log.mode is None


def test_tsv_log_appends_columns_and_restores_the_saved_header(tmp_path):
    path = tmp_path / "t.tsv"
    log = TsvLog(str(path))
    log.load(keep=0)
    log.write({"step": 1, "loss": 0.5})
    log.write({"step": 2, "loss": 0.25, "extra": 3.0})
    assert path.read_text() == "step\tloss\textra\n1\t0.5\t\n2\t0.25\t3\n"
    resumed = TsvLog(str(path))
    resumed.load(keep=1, columns=["step", "loss"])  # the state was saved before 'extra' existed
    assert path.read_text() == "step\tloss\n1\t0.5\n" and resumed.columns == ["step", "loss"]
    assert math.isclose(float(path.read_text().splitlines()[1].split("\t")[1]), 0.5)
