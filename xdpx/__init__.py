"""XDPX: a config-driven PyTorch framework for NLU training.

Importing xdpx has no side effects: no process, no user file, no network (DESIGN invariant 9).
"""

__version__ = "0.1.0"
