"""Exports of a trained run (x-script export_torchscript, export_onnx, export_hf, export_tf, export_pt).

Each export loads a run directory (loading.py), writes the model in another format beside the run's
vocabulary and labels (companions.py), then checks the exported model against the eager PyTorch model
on real samples of the run's data (parity.py). Nothing here is imported by ``import xdpx``.
"""
