"""The ranges of key options are the right ones, not merely declared (test_option_ranges.py checks that).

Each expectation is written here from what the option means (a dropout is a probability below 1, a
learning rate is positive, a batch holds at least one sample ...), with values just inside and just outside,
and the message a user reads. Every option of that name that xdpx declares (models share ``dropout``,
several commands ``seed``) must hold it. Then a real x-train refuses values outside with the key named.
"""

from __future__ import annotations

import json

import pytest
from test_option_ranges import NUMERIC

from xdpx.cli import run_chain

PROBABILITY_BELOW_1 = ([0, 0.0, 0.5, 0.999], [-0.1, 1, 1.0, 10, 10.0], "must be in [0, 1)")
POSITIVE = ([1e-9, 0.5, 3, 100.0], [0, 0.0, -1e-5], "must be > 0")
COUNT_FROM_1 = ([1, 2, 1000], [0, -1], "must be >= 1")
COUNT_FROM_0 = ([0, 1, 1000], [-1], "must be >= 0")

# option name -> (accepted values, refused values, the message of the range)
EXPECTED = {
    "dropout": PROBABILITY_BELOW_1,
    "attention_probs_dropout_prob": PROBABILITY_BELOW_1,
    "hidden_dropout_prob": PROBABILITY_BELOW_1,
    "label_smoothing": PROBABILITY_BELOW_1,
    "momentum": PROBABILITY_BELOW_1,
    "mask_prob": ([0.01, 0.15, 0.99], [0, 0.0, 1, 1.0, 1.5], "must be in (0, 1)"),
    "ema_decay": ([0, 0.9, 0.999, 1], [-0.1, 1.01], "must be in [0, 1]"),
    "alpha": ([0, 0.5, 1], [-0.1, 1.5], "must be in [0, 1]"),
    "adam_betas": ([[0.9, 0.999], [0, 0]], [[0.9, 1.0], [-0.1, 0.9], [0.9], [0.9, 0.99, 0.999]],
                   "must be a list of 2 numbers, each in [0, 1)"),
    "learning_rate": POSITIVE,
    "adam_eps": POSITIVE,
    "temperature": POSITIVE,
    "weight_decay": ([0, 0.01, 1.0], [-0.01], "must be >= 0"),
    "clip_norm": ([0, 0.5, 5.0], [-1.0], "must be >= 0"),
    "batch_size": COUNT_FROM_1,
    "valid_batch_size": COUNT_FROM_1,
    "update_freq": COUNT_FROM_1,
    "max_update": COUNT_FROM_1,
    "max_epoch": COUNT_FROM_1,
    "log_interval": COUNT_FROM_1,
    "tolerance": COUNT_FROM_1,
    "max_len": COUNT_FROM_1,
    "max_predict": COUNT_FROM_1,
    "workers": COUNT_FROM_1,
    "hidden_size": COUNT_FROM_1,
    "embedding_dim": COUNT_FROM_1,
    "num_hidden_layers": COUNT_FROM_1,
    "num_attention_heads": COUNT_FROM_1,
    "seed": COUNT_FROM_0,
    "eval_interval": ([-1, 1, 50], [0, -2], "must be -1 or >= 1"),
    "warmup_steps": ([0, 100, 0.0, 0.1, 0.99], [-1, 1.0, 1.5, -0.1], "must be an integer >= 0 or a float in [0, 1)"),
}


def declared(name: str) -> list:
    return [(option, where) for option, where in NUMERIC if option.name == name]


@pytest.mark.parametrize("name", list(EXPECTED))
def test_a_key_option_holds_its_meaning_and_refuses_the_rest(name):
    accepted, refused, message = EXPECTED[name]
    options = declared(name)
    assert options, f"no option {name} found"
    for option, where in options:
        assert option.validate_msg == message, f"{where}: {name}"
        for value in accepted:
            assert option.validate(value), f"{where}: {name} refuses {value!r}"
        for value in refused:
            assert not option.validate(value), f"{where}: {name} accepts {value!r}"


@pytest.mark.parametrize(("key", "value", "message"), [
    ("dropout", 1.0, "must be in [0, 1)"),
    ("dropout", 10, "must be in [0, 1)"),
    ("learning_rate", 0, "must be > 0"),
    ("batch_size", 0, "must be >= 1"),
    ("warmup_steps", 1.5, "must be an integer >= 0 or a float in [0, 1)"),
    ("label_smoothing", -0.1, "must be in [0, 1)"),
])
def test_x_train_refuses_a_value_outside_with_the_key_and_the_file(reviews, tmp_path, capsys, key, value, message):
    config = tmp_path / "train.json"
    config.write_text(json.dumps({
        "__parent__": "${data_dir}/meta", "data_dir": str(reviews), "save_dir": str(tmp_path / "run"),
        "model": "cls_cnn", "loss": "cross_entropy", "embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3],
        "dropout": 0.1, "batch_size": 16, "learning_rate": 3e-3, "max_update": 2, "lr_scheduler": "linear_decay",
        "warmup_steps": 1, "major_metric": "accuracy", "viz": False, key: value}))
    capsys.readouterr()
    assert run_chain(["x-train", str(config), "--dry"]) == 2
    err = capsys.readouterr().err
    assert f"{config}: key '{key}': {value!r}: {message}" in err, err
    assert not (tmp_path / "run").exists()
