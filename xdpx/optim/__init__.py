"""Optimizers and learning-rate schedules.

- ``optimizers.get(args.optimizer).build(args, model) -> torch.optim.Optimizer`` (a plain torch optimizer,
  so its state_dict, zero_grad, step and GradScaler work as usual); lr starts at ``args.learning_rate``.
- ``scheduler = lr_schedulers.get(args.lr_scheduler)(args, total_updates)``;
  ``scheduler.lr(num_updates) -> float`` is a pure function of the number of updates already done, and
  ``scheduler.step_update(optimizer, num_updates)`` sets that lr before the next update. Being pure, a
  resumed run gets the exact schedule from its update counter; state_dict/load_state_dict exist for
  uniformity and hold nothing.

Built-in components are imported on the first lookup, never at ``import xdpx`` time.
"""

from xdpx.registry import Registry

optimizers = Registry("optimizer", modules=("xdpx.optim.adam", "xdpx.optim.sgd", "xdpx.optim.lamb"))
lr_schedulers = Registry("lr_scheduler", modules=("xdpx.optim.schedules",))
