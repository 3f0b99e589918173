"""The policy objects and the batching plan, on their own."""

from __future__ import annotations

import numpy as np

from xdpx.runtime.precision import DynamicLossScaler
from xdpx.train.batching import TrainBatches, micro_batches, rank_share, update_groups
from xdpx.train.policies import EarlyStopping, EvalSchedule, SavePolicy


def test_eval_schedule_is_sparser_during_warmup():
    schedule = EvalSchedule(10, warmup=60, multiplier=6)
    assert [n for n in range(1, 101) if schedule.due(n)] == [60, 70, 80, 90, 100]
    assert not any(EvalSchedule(-1).due(n) for n in range(100))


def test_early_stopping_counts_evaluations_without_a_new_best_and_survives_a_state_round_trip():
    stopping = EarlyStopping(tolerance=2, ascending=False)
    assert stopping.update(1.0, 10) and not stopping.update(1.5, 20)
    copy = EarlyStopping(tolerance=2, ascending=False)
    copy.load_state_dict(stopping.state_dict())
    assert not copy.should_stop and not copy.update(1.0, 30) and copy.should_stop
    assert copy.best_step == 10


def test_save_policies_keep_best_last_or_both():
    both = SavePolicy(True, best_only=True, last_only=True)
    assert both.record(10, True) == [] and both.record(20, False) == [] and both.record(30, False) == [20]
    assert both.saved == [10, 30]
    best = SavePolicy(True, best_only=True)
    assert not best.should_save(0.5, is_best=False) and best.should_save(0.6, is_best=True)
    assert best.record(10, True) == [] and best.record(20, True) == [10]
    last = SavePolicy(True, last_only=True)
    assert last.record(10, True) == [] and last.record(20, False) == [10]
    above = SavePolicy(True, above_score=0.8)
    assert not above.should_save(0.7, True) and above.should_save(0.9, False)
    assert not SavePolicy(False).should_save(1.0, True)


def test_keep_last_checkpoints_keeps_the_latest_n_and_the_best_across_a_state_round_trip():
    policy = SavePolicy(True, keep_last=2)
    assert policy.record(10, True) == [] and policy.record(20, False) == []
    assert policy.record(30, False) == []  # 10 stays: it is the best
    restored = SavePolicy(True, keep_last=2)
    restored.load_state_dict(policy.state_dict())
    assert restored.record(40, False) == [20] and restored.saved == [10, 30, 40]
    assert restored.record(50, True) == [10, 30]  # a new best: the old one goes
    assert restored.record(60, False) == [40] and restored.record(70, False) == []  # 50: best; 60, 70: latest
    assert restored.record(80, False) == [60] and restored.saved == [50, 70, 80]


def test_eval_schedule_per_epoch_is_asked_at_epoch_ends_only():
    schedule = EvalSchedule(-1, per_epoch=True)
    assert schedule.due_at_epoch_end() and not any(schedule.due(n) for n in range(1, 100))
    assert not EvalSchedule(10).due_at_epoch_end()


def test_update_groups_depend_on_seed_and_epoch_only_and_cover_every_sample():
    sizes = np.random.default_rng(0).integers(1, 50, size=103)
    groups = update_groups(sizes, 16, seed=1, epoch=1)
    assert sorted(np.concatenate(groups).tolist()) == list(range(103))
    assert all(np.array_equal(a, b) for a, b in zip(groups, update_groups(sizes, 16, seed=1, epoch=1)))
    assert not all(np.array_equal(a, b) for a, b in zip(groups, update_groups(sizes, 16, seed=1, epoch=2)))
    spread = [int(sizes[g].max() - sizes[g].min()) for g in groups]
    assert np.mean(spread) < 10  # similar lengths share an update


def test_ranks_and_micro_batches_split_an_update_without_loss():
    group = np.arange(10)
    shares = [rank_share(group, r, 4)[0] for r in range(4)]
    assert sorted(np.concatenate(shares).tolist()) == list(range(10))
    assert [len(b) for b in micro_batches(np.arange(7), 3)] == [3, 3, 1]
    share, stand_in = rank_share(np.arange(2), 3, 4)  # 2 samples, 4 ranks: rank 3 stands in, counting zero
    assert stand_in and share.tolist() == [0]


class _Split:
    def __init__(self, n: int, offset: int) -> None:
        self.sizes, self.offset = np.ones(n, dtype=np.int64), offset

    def __len__(self) -> int:
        return len(self.sizes)


def test_lazy_load_keeps_groups_inside_shards_and_resumes_at_an_offset():
    shards = {"train0": _Split(10, 0), "train1": _Split(7, 100)}
    batches = TrainBatches(lambda name: shards[name], ["train0", "train1"], lazy=True, seed=3)
    first = [(d.offset, g.tolist()) for d, g in batches.epoch(1, 4)]
    assert [d for d, _ in first] == [0, 0, 0, 100, 100]
    assert [(d.offset, g.tolist()) for d, g in batches.epoch(1, 4, start=3)] == first[3:]
    orders = {tuple(batches.units(e)) for e in range(2, 12)}
    assert orders == {("train0", "train1"), ("train1", "train0")}


def test_loss_scaler_halves_on_overflow_doubles_after_a_clean_window():
    scaler = DynamicLossScaler(init_scale=8, scale_window=3, min_scale=0.1)
    scaler.update(True)
    assert scaler.scale == 4
    for _ in range(3):
        scaler.update(False)
    assert scaler.scale == 8
