"""x-train: the training loop (loop.py), its state and checkpoints, logs, policies and the command.

Importing this package imports no torch: the command's options must resolve fast for ``--dry``.
"""
