"""Run x-train against a store that starts resetting connections at the N-th state.pt write, in a process of
its own, so that the test reads the real stderr, interpreter shutdown included
(tests/reliability/test_object_store_outage.py).

    python outage_runner.py UPSTREAM_PORT N CONFIG

The store's other options (credentials, retry_seconds) come from the io config in XDPX_IO_CONFIG; s3:// goes
through a :class:`flaky_store.ResettingProxy` in front of ``127.0.0.1:UPSTREAM_PORT``.
"""

from __future__ import annotations

import sys

from flaky_store import ResettingProxy

from xdpx import io
from xdpx.cli import x_train
from xdpx.train import saving


def main(upstream: int, nth: int, config: str) -> None:
    proxy = ResettingProxy(upstream)
    io.set_storage_options("s3", endpoint_url=f"http://127.0.0.1:{proxy.port}")
    original = saving.save_torch
    calls = 0

    def save_torch(obj, path):  # type: ignore[no-untyped-def]
        nonlocal calls
        if path.endswith("/state.pt"):
            calls += 1
            if calls == nth:
                proxy.reset()
        return original(obj, path)

    saving.save_torch = save_torch
    sys.argv = ["x-train", config]
    x_train()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
