"""Debugging aids of x-train: the NaN/Inf detector (nan_detector.py) and the gradient inspector
(gradients.py). Both import torch / matplotlib only when used."""
