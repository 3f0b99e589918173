"""x-serve: predictions from a run directory, interactively or over HTTP (docs/inference.md, "x-serve").

command.py (the x-serve command line and the interactive mode), predictor.py (inputs -> predictions with
a run), limits.py (what a request may hold), batching.py (requests gathered into shared forward passes,
a bounded queue), metrics.py (Prometheus), openapi.py (the schema), app.py (the routes), runner.py
(uvicorn: the socket, SIGTERM, worker processes). Nothing here is imported by ``import xdpx``: the
command loads it when it serves.
"""
