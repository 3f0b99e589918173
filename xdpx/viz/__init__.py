"""x-viz: reading a run's logs (runs.py), aligning runs by samples seen (align.py), the figures
(plots.py, matplotlib imported lazily) and the command (command.py). See docs/viz.md."""

from importlib import import_module
from typing import Any

# What other workflows may import from x-viz (``from xdpx.viz import plot_run``): name -> its module here.
# A name is loaded on first use, so importing one module of this package loads no other one
# (docs/architecture.md, "Rooms"; tests/test_layers.py checks that no workflow reaches past this list).
PUBLIC = {
    "plot_run": "command",
    "read_tsv": "runs",
    "save_figure": "plots",
    "TensorBoardMirror": "tensorboard",
}


def __getattr__(name: str) -> Any:
    if name not in PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f"{__name__}.{PUBLIC[name]}"), name)
