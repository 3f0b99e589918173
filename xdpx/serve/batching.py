"""Requests gathered into shared forward passes, behind a bounded queue.

The event loop submits each request's inputs; one asyncio task takes the waiting requests, up to
``batch_size`` inputs (waiting at most ``max_wait`` seconds for more once the first has arrived), and
hands them to ``predict`` in one worker thread (x-serve's: encode, then forward), so the loop keeps
accepting and answering while the model computes. While a pass runs, the next requests pile up and form
the next batch. ``predict`` returns one result per input, in order; a result may be an exception
instance that the request's handler turns into its answer (an input that cannot be encoded).

The queue is bounded in samples (``max_queue``, counting those being predicted): a request that would
go over is refused at once with :class:`Overloaded` (503 and Retry-After), never left to time out.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any


class Overloaded(Exception):
    """The queue is full: the client should retry after ``retry_after`` seconds."""

    def __init__(self, queued: int, limit: int, retry_after: int) -> None:
        super().__init__(f"the server is busy: {queued} samples are queued, at most {limit}; "
                         f"retry after {retry_after} s")
        self.retry_after = retry_after


@dataclass
class Job:
    samples: list[dict[str, Any]]
    future: asyncio.Future = field(repr=False)


class Batcher:
    """``await batcher.predict(samples)``: predictions of ``samples``, computed with other requests'."""

    def __init__(self, predict: Callable[[list[dict[str, Any]]], list[Any]], batch_size: int, max_wait: float,
                 max_queue: int, on_batch: Callable[[int, float], None] | None = None,
                 executor: ThreadPoolExecutor | None = None) -> None:
        self.predict_samples, self.batch_size, self.max_wait, self.max_queue = predict, batch_size, max_wait, max_queue
        self.on_batch = on_batch or (lambda size, seconds: None)
        self.waiting: collections.deque[Job] = collections.deque()
        self.queued = 0  # samples waiting or being predicted
        self.seconds_per_sample = 0.001  # a running estimate, for Retry-After
        self._arrived: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        # the thread that loaded the model, when given (xdpx/serve/model_thread.py); stopped with the batcher
        self._executor = executor or ThreadPoolExecutor(max_workers=1, thread_name_prefix="x-serve-model")

    def start(self) -> None:
        self._arrived = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._work())

    def running(self) -> bool:
        """True while the task that runs the forward passes is alive."""
        return self._task is not None and not self._task.done()

    async def stop(self) -> None:
        """After the last request is answered (uvicorn drains connections before the lifespan ends)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._executor.shutdown(wait=True)

    async def predict(self, samples: list[dict[str, Any]]) -> list[Any]:
        if self.queued and self.queued + len(samples) > self.max_queue:
            wait = self.queued * self.seconds_per_sample
            raise Overloaded(self.queued, self.max_queue, max(1, round(wait + 0.5)))
        job = Job(samples, asyncio.get_running_loop().create_future())
        self.queued += len(samples)
        self.waiting.append(job)
        assert self._arrived is not None, "Batcher.start() was not called"
        self._arrived.set()
        try:
            return await job.future
        finally:
            self.queued -= len(samples)

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._arrived is not None
        last_size = 2  # the samples of the last forward pass
        while True:
            if not self.waiting:
                self._arrived.clear()
                await self._arrived.wait()
            # Wait for company only when the last pass had some: with one client at a time there is none
            # to wait for, and the wait was a quarter of MiniLM's latency for one sentence (8.6 against
            # 11.2 ms p50); under load each pass gathers what arrived during the previous one anyway.
            deadline = loop.time() + (self.max_wait if last_size > 1 else 0.0)
            while sum(len(j.samples) for j in self.waiting) < self.batch_size and loop.time() < deadline:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), timeout=deadline - loop.time())
                except asyncio.TimeoutError:
                    break
            jobs, count = [], 0
            while self.waiting and (not jobs or count + len(self.waiting[0].samples) <= self.batch_size):
                job = self.waiting.popleft()
                jobs.append(job)
                count += len(job.samples)
            jobs = [j for j in jobs if not j.future.done()]  # a cancelled request is not predicted
            if not jobs:
                continue
            samples = [s for j in jobs for s in j.samples]
            last_size = len(samples)
            started = time.perf_counter()
            try:
                results = await loop.run_in_executor(self._executor, self.predict_samples, samples)
            except Exception as e:  # reported to every request of the batch; the worker goes on
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            seconds = time.perf_counter() - started
            self.seconds_per_sample = 0.8 * self.seconds_per_sample + 0.2 * seconds / len(samples)
            self.on_batch(len(samples), seconds)
            start = 0
            for job in jobs:
                if not job.future.done():
                    job.future.set_result(results[start: start + len(job.samples)])
                start += len(job.samples)
