"""x-viz: reading a run's logs (runs.py), aligning runs by samples seen (align.py), the figures
(plots.py, matplotlib imported lazily) and the command (command.py). See docs/viz.md."""

from xdpx.utils.front_door import front_door

# What other workflows may import from x-viz (``from xdpx.viz import plot_run``): name -> its module here.
# A name is loaded on first use, so importing one module of this package loads no other one
# (docs/architecture.md, "Rooms"; tests/test_layers.py checks that no workflow reaches past this list).
PUBLIC = {
    "plot_run": "command",
    "read_tsv": "runs",
    "save_figure": "plots",
    "TensorBoardMirror": "tensorboard",
}

__getattr__ = front_door(__name__, PUBLIC)
