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
