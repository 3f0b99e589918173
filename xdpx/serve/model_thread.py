"""The one thread of an x-serve process that runs torch: loading, the start-up checks, every forward pass.

Each thread that enters torch's OpenMP parallel regions gets a team of OpenMP threads of its own, and
two teams on the same cores slow every forward pass: MiniLM on one sentence (2 cores, torch's 2 threads)
took 7.8 ms per forward when one thread had done all the torch work, and 13.1 ms when the model was
loaded in the main thread and the forwards ran in the batcher's thread (13.4 ms in the main thread
once another thread had run a forward). So the server loads the model in the thread that predicts.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")


def model_thread() -> ThreadPoolExecutor:
    """A single-thread executor: give it to :func:`run_in` for loading and to the app for predicting."""
    return ThreadPoolExecutor(max_workers=1, thread_name_prefix="x-serve-model")


def run_in(executor: ThreadPoolExecutor, function: Callable[..., T], *args: Any) -> T:
    """``function(*args)`` in the executor's thread; its exceptions are raised here."""
    return executor.submit(function, *args).result()
