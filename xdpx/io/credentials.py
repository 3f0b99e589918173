"""Storage options (endpoints, credentials) per protocol, filesystem lookup, and secret redaction.

Precedence, lowest first: for oss only, the ``OSS_*`` environment variables (ossfs reads none but the
endpoint) < built-in defaults < the file named by ``XDPX_IO_CONFIG`` (read on first use, never at import)
< :func:`configure` < :func:`set_storage_options` < the bucket's entry in the buckets file named by
``XDPX_BUCKETS`` (xdpx/io/buckets.py: per-bucket endpoints and credential sources). Anything not given
here falls back to each backend's own mechanism (AWS env vars and ``~/.aws``, gcloud credentials, ...).

Secrets are never printed: every message built here that shows options goes through :func:`redact`.
"""

from __future__ import annotations

import builtins
import copy
import json
import os
import re
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from xdpx.errors import UserError
from xdpx.utils.optional import PACKAGES, MissingPackage, missing_message

from .buckets import CREDENTIAL_OPTIONS, bucket_options
from .buckets import secret_values as bucket_secrets
from .paths import CANONICAL_PROTOCOL, PathLike, local_path, protocol_of, split_protocol, to_str

if TYPE_CHECKING:
    from fsspec import AbstractFileSystem

MASK = "***"

# The fsspec backend of each canonical protocol: s3fs and ossfs come with an xdpx extra (xdpx.utils.optional).
BACKENDS = {"s3": "s3fs", "oss": "ossfs", "gs": "gcsfs", "http": "aiohttp"}

# Listing caches make a file written by another process (a tune worker, a second run) invisible to
# exists()/listdir() for the life of the process; correctness beats the saved list calls.
_DEFAULTS: dict[str, dict[str, Any]] = {
    "s3": {"use_listings_cache": False},
    "gs": {"use_listings_cache": False},
    "oss": {"use_listings_cache": False},
}

# Backends whose library reads no credentials from the environment: the variables their own tools use
# (Alibaba Cloud's ossutil/oss2 for OSS) fill the options not given in the io config. Lowest precedence.
_ENV_OPTIONS: dict[str, dict[str, str]] = {
    "oss": {
        "endpoint": "OSS_ENDPOINT",
        "key": "OSS_ACCESS_KEY_ID",
        "secret": "OSS_ACCESS_KEY_SECRET",
        "token": "OSS_SESSION_TOKEN",
    },
}

_lock = threading.RLock()
_file_layer: dict[str, dict[str, Any]] | None = None  # from XDPX_IO_CONFIG, loaded lazily
_configured: dict[str, dict[str, Any]] = {}
_explicit: dict[str, dict[str, Any]] = {}

_SECRET_NAME = re.compile(r"key|secret|token|passw|credential", re.IGNORECASE)
# In free text only unambiguous names are masked, so that object keys ("Key=a/b.txt") stay readable.
_SECRET_ASSIGN = re.compile(
    r"((?:secret|token|passw\w*|access_key\w*|secret_key|api_key|private_key|account_?key|credential\w*)"
    r"[\"']?\s*[=:]\s*[\"']?)([^\s,;&'\"}]+)",
    re.IGNORECASE,
)
_ENV_SECRET = re.compile(r"SECRET|TOKEN|PASSWORD|ACCESS_KEY|PRIVATE_KEY|API_KEY")
# Names of credential fields (storage options, URL query parameters, keys of option dicts), matched on
# the snake_case form of the name (X-Amz-Signature -> x_amz_signature): whole words only, so that
# max_tokens, tokenizer or sort_key stay readable.
_SECRET_FIELD = re.compile(
    r"passw|passphrase|secret|credential|connection_?string|authorization|^key$|(?:^|_)(?:pwd|token|sig|signature|sas|"
    r"(?:api|access|account|private|master|shared|signing|encryption|sas)_?key(?:_?id)?)(?:$|_)"
)
# The password of a URL: scheme://user:PASSWORD@host (SQLAlchemy reads it up to the first @).
_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#'\"]*:)([^\s@'\"]+)(?=@)")
_URL_MASKED_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#'\"]*):" + re.escape(MASK) + "@")
# A query parameter (?name=value, &name=value) or a connection-string field (;Name=value).
_PARAMETER = re.compile(r"([?&;])([A-Za-z_][\w.\-]*)=([^&#;\s'\"]*)")
# Set by a process for the processes it starts (x-tune for its trials): masked value -> real value.
HANDOFF_ENV = "XDPX_MASKED_CREDENTIALS"


class IoConfigError(UserError, ValueError):
    """An io config (the file named by XDPX_IO_CONFIG, or one given to :func:`configure`) that cannot be used:
    one line naming the file, never a traceback. A ValueError too, so a config's path check (which takes a
    ValueError for a path the io layer cannot read) reports it against the key whose path needed it."""


def _canonical(protocol: str) -> str:
    protocol = protocol.lower().rstrip(":/")
    return CANONICAL_PROTOCOL.get(protocol, protocol)


def _validate(config: Any, source: str) -> dict[str, dict[str, Any]]:
    if not isinstance(config, Mapping):
        raise IoConfigError(f"io config from {source} must map protocol -> options, got {type(config).__name__}")
    out: dict[str, dict[str, Any]] = {}
    for proto, opts in config.items():
        if not isinstance(opts, Mapping):
            raise IoConfigError(
                f"io config from {source}: options for {proto!r} must be a mapping, got {type(opts).__name__}"
            )
        out.setdefault(_canonical(str(proto)), {}).update(copy.deepcopy(dict(opts)))
    return out


def _read_config_file(path: PathLike, named_by: str = "") -> dict[str, dict[str, Any]]:
    """The options of an io config file; ``named_by`` (XDPX_IO_CONFIG) is where its name came from."""
    # The config is local by design: the credentials to reach a remote one would have to come from it.
    fname = os.path.expanduser(to_str(path))
    where = f"{named_by}: " if named_by else ""
    try:
        with builtins.open(fname, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        raise IoConfigError(f"{where}io config file not found: {fname}") from None
    except (OSError, UnicodeDecodeError) as e:  # a folder, no permission, not a text file
        raise IoConfigError(f"{where}io config {fname} cannot be read: {e.strerror if isinstance(e, OSError) else e}"
                            ) from None
    try:
        data = json.loads(text)
    except ValueError:
        try:
            # lazy: hjson only for an io config that is not plain JSON; its ImportError names the fix
            import hjson
        except ImportError:
            raise IoConfigError(f"{where}io config {fname} is not valid JSON (install hjson to use hjson)") from None
        try:
            data = hjson.loads(text)
        except Exception as e:  # hjson raises its own error types
            # The parser message may quote the offending line, which can hold a secret.
            raise IoConfigError(f"{where}io config {fname} is not valid hjson/json: {redact(str(e))}") from None
    return _validate(data, f"{fname} (named by {named_by})" if named_by else fname)


def _file_options() -> dict[str, dict[str, Any]]:
    global _file_layer
    with _lock:
        if _file_layer is None:
            env = os.environ.get("XDPX_IO_CONFIG")
            _file_layer = _read_config_file(env, "XDPX_IO_CONFIG") if env else {}
        return _file_layer


def configure(config: PathLike | Mapping[str, Mapping[str, Any]]) -> None:
    """Merge storage options per protocol from a dict or an hjson/json file.

    Example: ``configure({"s3": {"endpoint_url": "http://minio:9000", "key": "...", "secret": "..."}})``.
    Options of a protocol given again are updated key by key.
    """
    new = _validate(config, "dict") if isinstance(config, Mapping) else _read_config_file(config)
    with _lock:
        for proto, opts in new.items():
            _configured.setdefault(proto, {}).update(opts)


def set_storage_options(protocol: str, **options: Any) -> None:
    """Set fsspec storage options for one protocol (highest precedence), e.g. ``endpoint_url=...``."""
    with _lock:
        _explicit.setdefault(_canonical(protocol), {}).update(copy.deepcopy(options))


def reset_storage_options() -> None:
    """Forget configure()/set_storage_options() and re-read ``XDPX_IO_CONFIG`` on next use."""
    global _file_layer
    with _lock:
        _configured.clear()
        _explicit.clear()
        _file_layer = None


def storage_options(protocol: str, path: str | None = None) -> dict[str, Any]:
    """The merged options of a protocol (a copy), and of ``path``'s bucket where the buckets file lists it
    (xdpx/io/buckets.py): the bucket's entry, more specific, replaces the protocol's endpoint and
    credentials. Holds secrets: never print it, print ``redact(...)``."""
    proto = _canonical(protocol)
    with _lock:
        merged: dict[str, Any] = {
            opt: os.environ[var] for opt, var in _ENV_OPTIONS.get(proto, {}).items() if os.environ.get(var)
        }
        for layer in (_DEFAULTS, _file_options(), _configured, _explicit):
            merged.update(copy.deepcopy(layer.get(proto, {})))
    bucket = bucket_options(proto, path) if path else None
    if bucket is not None:
        if any(k in bucket for k in CREDENTIAL_OPTIONS):
            for k in CREDENTIAL_OPTIONS:
                merged.pop(k, None)
        merged.update(bucket)
    return merged


def _known_secrets() -> set[str]:
    values: set[str] = set()

    def collect(obj: Any, secret: bool) -> None:
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                collect(v, secret or bool(_SECRET_NAME.search(str(k))))
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                collect(v, secret)
        elif secret and isinstance(obj, str) and len(obj) >= 4:
            values.add(obj)

    with _lock:
        layers = [_configured, _explicit, _file_layer or {}]
    for layer in layers:
        collect(layer, False)
    for name, value in os.environ.items():
        if _ENV_SECRET.search(name.upper()) and len(value) >= 6:
            values.add(value)
    return values | bucket_secrets()  # what the buckets file resolves to, whatever the variables are called


def is_secret_name(name: Any) -> bool:
    """Whether a field called ``name`` holds a credential (password, secret, token, key, signature...)."""
    text = str(name)
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_\-]*", text):  # a path or URL used as a key is no field name
        return False
    snake = re.sub(r"[^a-z0-9]+", "_", re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", text).lower())
    if snake.endswith(("token_id", "token_ids")):  # a vocabulary id (pad_token_id of a transformers config)
        return False
    return bool(_SECRET_FIELD.search(snake.strip("_")))


def _mask_url_password(match: re.Match[str]) -> str:
    password = match.group(2)
    if "/" in password and password.split("/", 1)[0].isdigit():
        return match.group(0)  # host:PORT/path@...: a port, not a password
    return match.group(1) + MASK


def _mask_parameter(match: re.Match[str]) -> str:
    if not is_secret_name(match.group(2)) or not match.group(3):
        return match.group(0)
    return f"{match.group(1)}{match.group(2)}={MASK}"


def redact(obj: Any, *, assignments: bool = True) -> Any:
    """A copy of ``obj`` safe to print or write: XDPX's one way of masking credentials (docs/io.md).

    Strings: the password of a URL (``postgresql://user:***@host``), secret query parameters and
    connection-string fields (``?password=***``, ``&sig=***``, ``X-Amz-Signature=***``, ``;AccountKey=***``),
    every configured secret value (and secret-looking environment variable) become ``'***'``; with
    ``assignments`` (free text) also the value of ``secret=...``/``token: ...``-style assignments (off for
    source code, where ``token: str`` is a type hint). Mappings: values under credential names
    (key, secret, token, password, ..._key, signature...) become ``'***'``, other keys and values are
    redacted as strings (recursively); lists and tuples item by item.
    """
    if isinstance(obj, Mapping):
        return {
            redact(k, assignments=assignments): (
                MASK if is_secret_name(k) and v not in (None, "", False) else redact(v, assignments=assignments))
            for k, v in obj.items()
        }
    if isinstance(obj, (list, tuple)):
        return type(obj)(redact(v, assignments=assignments) for v in obj)
    if isinstance(obj, str):
        text = obj
        # Longest first, so a secret that contains another is masked whole.
        for secret in sorted(_known_secrets(), key=len, reverse=True):
            text = text.replace(secret, MASK)
        text = _PARAMETER.sub(_mask_parameter, _URL_PASSWORD.sub(_mask_url_password, text))
        return _SECRET_ASSIGN.sub(lambda m: m.group(1) + MASK, text) if assignments else text
    return obj


def hand_down(values: Any) -> None:
    """Let the processes this one starts use the credentials in ``values`` that they will read masked
    (x-tune's trials read their configs, written through :func:`redact`); kept in the environment only."""
    found: dict[str, str] = {}

    def collect(obj: Any) -> None:
        if isinstance(obj, Mapping):
            for k, v in obj.items():
                collect(k)
                collect(v)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                collect(v)
        elif isinstance(obj, str) and redact(obj) != obj:
            found[redact(obj)] = obj

    collect(values)
    if found:
        os.environ[HANDOFF_ENV] = json.dumps({**json.loads(os.environ.get(HANDOFF_ENV) or "{}"), **found})


def unmask(value: str) -> str:
    """The value to connect with, for a ``value`` that may have been read back masked (args.py, a trial
    config): the real one handed down by the parent process (:func:`hand_down`), else the URL without its
    masked password, so that the client library takes the password from its own place (libpq's
    PGPASSWORD or ~/.pgpass, MLFLOW_TRACKING_PASSWORD, the io config). Other values are returned as they are."""
    handed = json.loads(os.environ.get(HANDOFF_ENV) or "{}")
    if value in handed:
        return handed[value]
    return _URL_MASKED_PASSWORD.sub(r"\1@", value)


def backend_missing(scheme: str, proto: str, path: PathLike) -> str:
    """The one line for a path whose fsspec backend is not installed (the fix first, then the path)."""
    backend = BACKENDS.get(proto)
    if backend in PACKAGES:
        return missing_message(backend, f"the {scheme}:// path {to_str(path)}")
    fix = f"pip install {backend}" if backend else f"install the fsspec backend for {scheme}://"
    return f"{scheme}:// paths need an optional backend: {fix} (path: {to_str(path)})"


def filesystem(path: PathLike) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem for a path (configured with its storage options) and the backend's path.

    An escape hatch for code that needs fsspec directly; prefer the functions of :mod:`xdpx.io`.
    """
    scheme, _ = split_protocol(path)
    scheme = scheme or "file"
    proto = protocol_of(path)
    import fsspec  # lazy: 0.1 s, and pulls in nothing remote until a protocol is used

    try:
        fsspec.get_filesystem_class(scheme)
    except ImportError:
        raise MissingPackage(backend_missing(scheme, proto, path), name=BACKENDS.get(proto)) from None
    except ValueError:
        raise ValueError(f"unsupported path scheme {scheme}:// in {to_str(path)}") from None
    if proto == "file":
        path = local_path(path)
    opts = storage_options(proto, to_str(path))
    if proto == "oss" and not opts.get("endpoint"):
        # ossfs would only log a warning and then fail on first use with an obscure error.
        raise ValueError(
            f"oss:// paths need an endpoint (path: {to_str(path)}): set OSS_ENDPOINT, or "
            "'oss: {endpoint: https://oss-<region>.aliyuncs.com, key: ..., secret: ...}' in the io config "
            "file named by XDPX_IO_CONFIG (see docs/io.md)"
        )
    opts.pop("retry_seconds", None)  # xdpx.io's own setting (retry.py), not the backend's
    try:
        fs = fsspec.filesystem(scheme, **opts)
    except Exception as e:
        # 'from None': the original traceback could carry the options, secrets included.
        raise ValueError(
            f"cannot create the {scheme}:// filesystem for {to_str(path)} with options {redact(opts)}: "
            f"{type(e).__name__}: {redact(str(e))}"
        ) from None
    return fs, fs._strip_protocol(to_str(path))
