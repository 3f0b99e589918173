"""Which process of a torchrun job this is, from the environment torchrun sets (no torch import)."""

from __future__ import annotations

import os
from typing import Any


def get_rank() -> int:
    return int(os.environ.get("RANK", "0"))


def get_world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def is_master(args: Any = None) -> bool:
    """True in the main process (rank 0, or a run of one process). ``args`` is accepted for the seed
    manual's ``is_master(args)`` spelling and not needed."""
    return get_rank() == 0
