"""Inference: x-eval, x-pred and x-serve, and what they share with training.

- :mod:`.loading`: a model from a run directory (``save_dir``) or a training config (``config``), its
  checkpoint resolved through xdpx/models/checkpoints.py, missing/unexpected weight keys reported;
- :mod:`.sources` and :mod:`.encoding`: the data (a split of data_dir, a raw text file, a Parquet file,
  an SQL table) turned into samples by the run's own parser, loader, tokenizer and processor;
- :mod:`.scoring`: the one evaluation function x-train and x-eval both call, and batched prediction;
- :mod:`.outputs`: probabilities, labels and the TSV / numpy files of x-pred;
- :mod:`.evaluate`, :mod:`.predict`, :mod:`.serve`: the commands.

Nothing here imports torch at module level except the modules that run models.
"""

from xdpx.utils.front_door import front_door

# What other workflows may import from inference (``from xdpx.inference import load_model``): name -> its module here.
# A name is loaded on first use, so importing one module of this package loads no other one
# (docs/architecture.md, "Rooms"; tests/test_layers.py checks that no workflow reaches past this list).
PUBLIC = {
    "read_lines": "retrieve",
    "Retriever": "retrieve",
    "reranker_problem": "rerank_options",
    "Reranker": "rerank",
    "calibrates": "calibration",
    "run_temperature": "calibration",
    "scale_logits": "calibration",
    "BASELINES": "explain",  # token attributions (x-serve's POST /explain)
    "Unsupported": "explain",
    "check_explainable": "explain",
    "encode_texts": "explain",
    "explain_samples": "explain",
    "LOAD_OPTIONS": "options",
    "TRUST_USER_DIR": "options",
    "load_model": "loading",
    "run_options": "loading",
    "prediction_format": "outputs",
    "probabilities": "outputs",
}

__getattr__ = front_door(__name__, PUBLIC)
