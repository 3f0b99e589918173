"""The runtime: what training and inference both run on, below every workflow (docs/architecture.md, "Floors").

- :mod:`.distributed`: the process group and each process's device (one process, or several under torchrun);
- :mod:`.devices`: a collated batch moved to a device;
- :mod:`.precision`: autocast, the fp16 loss scaler and the gradient step that respects it;
- :mod:`.seeding`: derived seeds and the capture of every random generator (invariant 5);
- :mod:`.compiling`: ``compile: true`` (torch.compile's inductor, or eager with one warning);
- :mod:`.out_of_memory`: which errors are out-of-memory (auto_ga's trigger, on every rank);
- :mod:`.scoring`: the one evaluation of a model on a dataset, and batched prediction;
- :mod:`.vector_index`, :mod:`.index_kinds`: an index folder of x-script build_index (exact, HNSW, IVF; int8,
  binary), written and read back (x-script search, x-serve --corpus);
- :mod:`.run_files`: the names and formats of a run's files that other commands read back;
- :mod:`.onnx_session`: an onnxruntime session called like a run's model (ONNX exports, int8 models).

Training (xdpx/train), evaluation and prediction (xdpx/inference), serving and the tools import these; the
runtime imports no workflow. Importing this package imports nothing: torch comes with the modules that use it.
"""
