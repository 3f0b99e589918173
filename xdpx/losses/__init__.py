"""Losses: ``loss = losses.get(args.loss)(args)``; ``loss(model, batch) -> (loss_sum, sample_size, logs)``.

The loss is SUMMED over the batch and ``sample_size`` says what it is normalised by, so the trainer can
divide by the sample size of the whole update (micro-batches and ranks). Built-in losses are imported on
the first lookup, never at ``import xdpx`` time. See docs/architecture.md.
"""

from xdpx.registry import Registry

losses = Registry("loss", modules=("xdpx.losses.classification", "xdpx.losses.regression", "xdpx.losses.mlm",
                                   "xdpx.losses.focal", "xdpx.losses.circle", "xdpx.losses.taylor",
                                   "xdpx.losses.multilabel", "xdpx.losses.bi_encoder", "xdpx.losses.ner",
                                   "xdpx.losses.distill", "xdpx.losses.intermediate", "xdpx.losses.pair_scores",
                                   "xdpx.losses.distances", "xdpx.losses.margin_mse"))
