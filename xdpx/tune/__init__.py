"""x-tune: hyperparameter search over x-train on Optuna (docs/tune.md).

options.py (the keys of tune.hjson), space.py (space.hjson: parsing, checks, Optuna distributions),
study.py (storage, sampler, pruner), plan.py (the trial configs), runner.py (trials as x-train processes),
reporter.py (the trainer's side: report each evaluation, stop when pruned), results.py (results.tsv,
overview.png, best_config.hjson), command.py (the command). Nothing here imports optuna or torch at
module level.
"""

from xdpx.utils.front_door import front_door

# What other workflows may import from x-tune (``from xdpx.tune import trial_reporter_from_env``): name -> its module here.
# A name is loaded on first use, so importing one module of this package loads no other one
# (docs/architecture.md, "Rooms"; tests/test_layers.py checks that no workflow reaches past this list).
PUBLIC = {
    "trial_reporter_from_env": "reporter",
}

__getattr__ = front_door(__name__, PUBLIC)
