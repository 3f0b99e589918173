"""XDPX: a config-driven PyTorch framework for NLU training.

Importing xdpx has no side effects: no process, no user file, no network (invariant 9 of docs/architecture.md).
"""

__version__ = "0.1.0"
