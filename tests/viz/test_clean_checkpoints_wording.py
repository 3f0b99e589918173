"""clean_checkpoints says what it keeps in words when a run has no best checkpoint (no evaluation scored a
saved one) or no checkpoint at all, instead of ``keep checkpoints of update none``."""

from __future__ import annotations

from viz_helpers import train

from xdpx.cli import x_script


def test_runs_without_a_best_or_without_checkpoints_are_described(reviews, tmp_path, capsys) -> None:
    root = tmp_path / "root"
    root.mkdir()
    # no validation: checkpoints at updates 4 and 8, none of them scored
    code, unscored = train(root, reviews, "unscored", valid_subset=None, max_update=8,
                           save_best_only=False, save_last_only=False, eval_interval=4)
    assert code == 0
    saved = sorted(p.name for p in unscored.glob("checkpoint-*.pt"))
    assert saved == ["checkpoint-4.pt", "checkpoint-8.pt"], saved
    code, empty = train(root, reviews, "empty", max_update=4, eval_interval=4)
    assert code == 0
    for checkpoint in empty.glob("checkpoint-*.pt"):  # a run whose checkpoints someone removed
        checkpoint.unlink()

    assert x_script(["clean_checkpoints", str(root), "--dry"]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if str(root) in line]
    assert f"{unscored}: keep checkpoints of update 8 (no best: no evaluation of the major metric scored a saved " \
           "checkpoint; the last is kept); would delete 1 file(s)" in "\n".join(lines), lines
    assert any(line.startswith(f"{empty}: no checkpoint to keep (the run saved none); would delete 0 file(s)")
               for line in lines), lines
    assert not any("none" in line.split(";")[0].split(":")[-1] for line in lines if "keep checkpoints" in line)
