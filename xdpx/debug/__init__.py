"""Debugging aids of x-train: the NaN/Inf detector (nan_detector.py) and the gradient inspector
(gradients.py). Both import torch / matplotlib only when used."""

from xdpx.utils.front_door import front_door

# What other workflows may import from x-train's debugging aids (``from xdpx.debug import NanDetector``): name -> its module here.
# A name is loaded on first use, so importing one module of this package loads no other one
# (docs/architecture.md, "Rooms"; tests/test_layers.py checks that no workflow reaches past this list).
PUBLIC = {
    "NanDetector": "nan_detector",
    "gradient_stats": "gradients",
    "plot_gradients": "gradients",
}

__getattr__ = front_door(__name__, PUBLIC)
