"""Component options: choosing a component activates its options; errors name the fix."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.components.helpers import make_args
from xdpx.config.errors import ConfigError


def test_choosing_re2_activates_its_options():
    args = make_args(model="re2", blocks=3, alignment="identity")
    assert args.blocks == 3 and args.fusion == "full" and args.group_of("blocks") == "model: re2"
    assert "num_filters" not in args
    assert "num_filters" in make_args(model="cls_cnn")


def test_an_option_of_another_model_says_whose_it_is():
    with pytest.raises(ConfigError, match="unknown key 'blocks': it is an option of model 're2'"):
        make_args(model="cls_cnn", blocks=2)


def test_misspellings_get_did_you_mean():
    with pytest.raises(ConfigError, match="unknown model 're3'. Did you mean 're2'"):
        make_args(model="re3")
    with pytest.raises(ConfigError, match="unknown key 'alignmnet'. Did you mean 'alignment'"):
        make_args(model="re2", alignmnet="identity")
    with pytest.raises(ConfigError, match="'cosin' is not allowed. Did you mean 'cosine'"):
        make_args(lr_scheduler="one_cycle", anneal_strategy="cosin")


def test_values_are_validated():
    with pytest.raises(ConfigError, match="key 'dropout': 1.5: must be in \\[0, 1\\)"):
        make_args(dropout=1.5)
    with pytest.raises(ConfigError, match="key 'warmup_steps': 1.5: must be an integer"):
        make_args(lr_scheduler="linear_decay", warmup_steps=1.5)
    with pytest.raises(ConfigError, match="nesterov needs momentum > 0"):
        make_args(optimizer="sgd", nesterov=True)


def test_polynomial_annealing_activates_its_power():
    assert "anneal_p" not in make_args(lr_scheduler="one_cycle")
    assert make_args(lr_scheduler="one_cycle", anneal_strategy="polynomial").anneal_p == 1.0


def test_major_metric_must_be_reported_by_the_loss():
    assert make_args(major_metric="macro_f1").major_metric == "macro_f1"
    assert make_args(major_metric="f1", num_classes=2).major_metric == "f1"
    assert make_args(loss="mse", major_metric="spearman", target_type="regression")
    with pytest.raises(ConfigError, match="major_metric is not reported with this loss"):
        make_args(major_metric="f1")  # 3 classes: binary f1 does not exist
    with pytest.raises(ConfigError, match="choose 'loss' or one of: pearson, spearman"):
        make_args(loss="mse", major_metric="accuracy")


def test_importing_the_packages_does_not_import_torch():
    code = ("import sys, xdpx, xdpx.models, xdpx.losses, xdpx.metrics, xdpx.optim, xdpx.tasks; "
            "assert 'torch' not in sys.modules and 'numpy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_loss_and_target_type_must_agree():
    with pytest.raises(ConfigError, match="needs target_type: regression"):
        make_args(loss="mse", major_metric="pearson")
    with pytest.raises(ConfigError, match="target_type: regression needs a regression loss"):
        make_args(loss="cross_entropy", target_type="regression")
