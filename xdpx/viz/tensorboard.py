"""Optional TensorBoard event files (``tensorboard: true``) mirroring train.log.tsv and valid.log.tsv.

For users who expect TensorBoard; x-viz stays the way to compare runs by samples seen. Scalars go to
save_dir/tensorboard as ``train/<column>`` and ``valid/<column>`` at the update number. On resume the
writer purges the events after the resumed update, so the curves read like the tsv logs.
Needs the ``tensorboard`` package (``pip install 'xdpx[tensorboard]'``).
"""

from __future__ import annotations

import math
from typing import Any

from xdpx import io
from xdpx.utils.optional import require

TENSORBOARD_DIR = "tensorboard"
SKIPPED = ("epoch", "step")


class TensorBoardMirror:
    """Writes each log row as scalars (numbers only; empty cells skipped)."""

    def __init__(self, save_dir: str, purge_step: int | None = None) -> None:
        # x-train's config check says the same before any work; this covers a resume or a direct use
        require("tensorboard", "tensorboard: true")
        from torch.utils.tensorboard import SummaryWriter  # lazy: loads torch

        self.writer = SummaryWriter(io.join(save_dir, TENSORBOARD_DIR), purge_step=purge_step)

    def write(self, split: str, row: dict[str, Any]) -> None:
        step = int(row["step"])
        for name, value in row.items():
            if name in SKIPPED or isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            if math.isfinite(value):
                self.writer.add_scalar(f"{split}/{name}", value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
