"""Riding out object-store outages: each remote operation is retried with backoff for a set time.

An object store that stops answering (connection refused or reset, timeouts, 5xx "slow down") is usually
back within minutes: a training run should wait, not die with a 50-frame traceback after the backend's
own few seconds of retries. Each remote call of xdpx.io (metadata, listing, open, upload, download,
delete) is retried for ``retry_seconds`` (default 600, i.e. 10 minutes), sleeping 1, 2, 4 ... 30 s between
attempts; past that it raises :class:`StoreUnavailableError`, one message naming the path and the last
error. Writes stay atomic throughout (an upload is published whole or not at all), so nothing is corrupt.

The window, lowest precedence first: the default, the environment variable ``XDPX_IO_RETRY_SECONDS``, a
``retry_seconds`` entry in a protocol's storage options (io config file, ``configure``,
``set_storage_options``). 0 disables the retries (the backend's own still apply). See docs/io.md.
"""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .credentials import redact, storage_options
from .paths import is_remote, protocol_of, to_str

DEFAULT_RETRY_SECONDS = 600.0
MAX_SLEEP = 30.0
RETRY_OPTION = "retry_seconds"  # a storage option read here, never passed to the backend

# Connection-level failures of botocore/aiobotocore, aiohttp and requests (matched by name: importing the
# backends' libraries here would load them for local work too).
_TRANSIENT_NAMES = frozenset({
    "EndpointConnectionError", "ConnectTimeoutError", "ReadTimeoutError", "ConnectionClosedError",
    "ClientConnectorError", "ServerDisconnectedError", "ClientOSError", "ClientPayloadError",
    "ResponseStreamingError", "IncompleteReadError", "ServerTimeoutError", "ProxyConnectionError",
})
_TRANSIENT_WORDS = ("SlowDown", "ServiceUnavailable", "503 Service", "InternalError", "RequestTimeout")

F = TypeVar("F", bound=Callable[..., Any])


class StoreUnavailableError(OSError):
    """The object store did not answer within the retry window."""


def is_transient(error: BaseException) -> bool:
    """Whether an error (or one it was raised from) says the store is unreachable or overloaded."""
    seen = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, StoreUnavailableError):
            return False  # an inner call already waited its full window
        seen.add(id(e))
        if isinstance(e, (ConnectionError, TimeoutError)) or type(e).__name__ in _TRANSIENT_NAMES:
            return True
        if any(word in str(e) for word in _TRANSIENT_WORDS):
            return True
        e = e.__cause__ or e.__context__
    return False


def retry_seconds(url: str) -> float:
    """The retry window for ``url``'s protocol (see the module docstring)."""
    value: Any = storage_options(protocol_of(url), url).get(RETRY_OPTION)
    if value is None:
        value = os.environ.get("XDPX_IO_RETRY_SECONDS", DEFAULT_RETRY_SECONDS)
    try:
        return max(0.0, float(value))
    except ValueError:
        raise ValueError(f"{RETRY_OPTION} / XDPX_IO_RETRY_SECONDS must be a number of seconds, got {value!r}") from None


def call_with_retries(url: str, call: Callable[[], Any], what: str = "") -> Any:
    """``call()``, retried while it fails with transient errors, for the retry window of ``url``."""
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            result = call()
        except Exception as error:
            if not is_transient(error):
                raise
            waited = time.monotonic() - started
            window = retry_seconds(url)
            cause = f"{type(error).__name__}: {redact(str(error)).splitlines()[0] if str(error) else ''}"
            if waited >= window:
                raise StoreUnavailableError(
                    f"{redact(url)}: the object store did not answer for {waited:.0f} s ({cause}); gave up "
                    f"after the retry window of {window:.0f} s (storage option {RETRY_OPTION} or "
                    "XDPX_IO_RETRY_SECONDS; docs/io.md)") from None
            if attempt == 0:
                print(f"xdpx.io: {redact(url)}{' (' + what + ')' if what else ''}: the object store does not "
                      f"answer ({cause}); retrying for up to {window:.0f} s", file=sys.stderr, flush=True)
            time.sleep(min(MAX_SLEEP, 2.0 ** attempt, max(0.0, window - waited)))
            attempt += 1
            continue
        if attempt:
            print(f"xdpx.io: {redact(url)}: the object store answers again after "
                  f"{time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
        return result


_UNRETRIEVED = ("Task exception was never retrieved", "Future exception was never retrieved")


def _drop_lost_connections(loop: Any, context: dict[str, Any]) -> None:
    """The exception handler of fsspec's event loop: asyncio reports a task whose exception nobody awaited
    with a traceback on stderr. aiohttp leaves such tasks behind when a store resets its connections (the
    body writer of a request whose connection died: ``ClientConnectionResetError: Cannot write to closing
    transport``); the request itself fails with the same cause and is retried or reported in one line by
    :func:`call_with_retries`, so that report is noise. Anything else goes to asyncio's default handler."""
    error = context.get("exception")
    if context.get("message") in _UNRETRIEVED and error is not None and is_transient(error):
        return
    loop.default_exception_handler(context)


def _quiet_backend_loop() -> None:
    """Install :func:`_drop_lost_connections` on the event loop the async backends (s3fs, gcsfs, http) run
    on; checked at every remote call, since fsspec starts a new loop in a forked process."""
    try:
        from fsspec.asyn import get_loop  # lazy: only remote paths need fsspec's loop
    except ImportError:  # no backend installed: the call itself will say so
        return
    loop = get_loop()
    if loop.get_exception_handler() is not _drop_lost_connections:
        loop.set_exception_handler(_drop_lost_connections)


def retrying(path_arg: int = 0) -> Callable[[F], F]:
    """Decorate an xdpx.io function whose argument ``path_arg`` is a path: remote calls get retries."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            url = to_str(args[path_arg]) if len(args) > path_arg else None
            if url is None or not is_remote(url) or protocol_of(url) == "memory":
                return function(*args, **kwargs)
            _quiet_backend_loop()
            return call_with_retries(url, lambda: function(*args, **kwargs), function.__name__)

        return wrapper  # type: ignore[return-value]

    return decorate
