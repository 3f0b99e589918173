"""x-tune: hyperparameter search over x-train on Optuna (docs/tune.md).

options.py (the keys of tune.hjson), space.py (space.hjson: parsing, checks, Optuna distributions),
study.py (storage, sampler, pruner), plan.py (the trial configs), runner.py (trials as x-train processes),
reporter.py (the trainer's side: report each evaluation, stop when pruned), results.py (results.tsv,
overview.png, best_config.hjson), command.py (the command). Nothing here imports optuna or torch at
module level.
"""
