"""The options of x-pred's token attributions (``explain: true``), apart from the attribution code: x-pred's
command module declares them at start (every command's --help reads them), and xdpx.inference.explain
(Captum, the model's gradients) loads only when a prediction asks for attributions."""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least

BASELINES = ("pad", "zeros", "mask")

EXPLAIN_OPTIONS: list[Any] = [
    Option("explain", bool, default=False, children={True: [
        Option("explain_baseline", str, default="pad", choices=BASELINES,
               doc="what a token is compared with: pad (the padding token's vector), mask (the mask token's: "
                   "BERT vocabularies), zeros (a zero vector)"),
        Option("explain_steps", int, default=50, validate=at_least(1),
               doc="steps of the Integrated Gradients path (Gauss-Legendre): more steps, a smaller attribution_delta, "
                   "proportionally more time"),
    ]}, doc="add token attributions (Integrated Gradients over the word embeddings): for each sample the "
            "(word, score) pairs of its texts in their own words and the completeness delta (docs/inference.md, "
            "'Token attributions'); about explain_steps forward and backward passes per sample. Needs captum "
            "(pip install 'xdpx[explain]')"),
    Rule(lambda a: not a.explain or not a.binary, "explain: true writes JSON columns to a TSV: set binary: false",
         keys=("explain", "binary")),
]
