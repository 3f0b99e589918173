"""Exports of a trained run (x-script export_torchscript, export_onnx, export_hf, export_tf, export_pt).

Each export loads a run directory (loading.py), writes the model in another format beside the run's
vocabulary and labels (companions.py), then checks the exported model against the eager PyTorch model
on real samples of the run's data (parity.py). Nothing here is imported by ``import xdpx``.
"""

from xdpx.utils.front_door import front_door

# What other workflows may import from the exports (``from xdpx.export import check_parity``): name -> its module here.
# A name is loaded on first use, so importing one module of this package loads no other one
# (docs/architecture.md, "Rooms"; tests/test_layers.py checks that no workflow reaches past this list).
PUBLIC = {
    "ParityError": "parity",
    "check_parity": "parity",
    "parity_batches": "parity",
    "real_samples": "parity",
}

__getattr__ = front_door(__name__, PUBLIC)
