"""Per-bucket endpoints and credentials for object stores (S3, OSS), from a declarative file.

The file is named by the environment variable ``XDPX_BUCKETS`` (or :func:`use_buckets_file`); hjson or
JSON, mapping ``protocol://bucket`` to where the bucket lives and where its credentials come from::

    {
      "s3://team-data": {
        endpoint: https://s3.eu-west-1.amazonaws.com     // optional; S3's default otherwise
        region: eu-west-1
        credentials: {env: {key: TEAM_DATA_KEY_ID, secret: TEAM_DATA_SECRET}}  // names of variables
      }
      "oss://pretrain-lm": {
        region: cn-hangzhou          // endpoint https://oss-cn-hangzhou.aliyuncs.com unless given
        credentials: {profile: hangzhou}   // a profile of the Alibaba Cloud CLI (~/.aliyun/config.json)
      }
      "s3://*": {credentials: {profile: default}}   // every other S3 bucket (else: an error)
    }

Credential sources: ``env`` (variable names for key, secret and token), ``profile`` (S3: an AWS profile,
resolved by botocore from ~/.aws; OSS: a profile of ``~/.aliyun/config.json``, or of ``profile_file``),
``anonymous: true`` (S3 public buckets), or the values inline (``key``, ``secret``, ``token``), which are
refused unless the file is readable by its owner only (chmod 600): a file that holds no secret can be
shared and committed; one that does must be private.

Once a file lists buckets of a protocol, a bucket of that protocol missing from it is an error naming the
bucket and the file (a ``protocol://*`` entry covers the rest); protocols the file does not mention keep
the protocol-wide options (docs/io.md). Resolved secret values are known to :func:`xdpx.io.redact`.
"""

from __future__ import annotations

import builtins
import json
import os
import stat
import threading
from typing import Any

import hjson

from xdpx.errors import UserError

from .paths import CANONICAL_PROTOCOL, split_protocol

BUCKETS_ENV = "XDPX_BUCKETS"
ALIYUN_CONFIG = "~/.aliyun/config.json"
SOURCES = ("env", "profile", "anonymous", "key", "secret", "token", "profile_file")
ENTRY_KEYS = ("endpoint", "region", "credentials", "options")
CREDENTIAL_OPTIONS = ("key", "secret", "token", "anon", "profile")  # dropped from the protocol's options

_lock = threading.RLock()
_explicit_file: str | None = None
_cache: dict[tuple[str, float], dict[str, dict[str, Any]]] = {}


class BucketsError(UserError, ValueError):
    """A problem with the buckets file or one of its entries: one line naming the file and the bucket."""


def use_buckets_file(path: str | None) -> None:
    """Use this buckets file instead of ``$XDPX_BUCKETS`` (None: back to the variable)."""
    global _explicit_file
    with _lock:
        _explicit_file = os.path.expanduser(path) if path else None


def buckets_file() -> str | None:
    path = _explicit_file or os.environ.get(BUCKETS_ENV)
    return os.path.expanduser(path) if path else None


def _load(path: str) -> dict[str, dict[str, Any]]:
    try:
        mtime = os.stat(path).st_mtime
    except FileNotFoundError:
        raise BucketsError(f"{path}: buckets file not found (named by {BUCKETS_ENV})") from None
    with _lock:
        if (path, mtime) in _cache:
            return _cache[(path, mtime)]
    with builtins.open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        data = hjson.loads(text)
    except Exception as e:  # the parser's message may quote a line holding a secret: only its position
        raise BucketsError(f"{path}: not valid hjson/JSON (line {getattr(e, 'lineno', '?')})") from None
    if not isinstance(data, dict):
        raise BucketsError(f"{path}: must map 'protocol://bucket' to its entry")
    table: dict[str, dict[str, Any]] = {}
    for name, entry in data.items():
        scheme, bucket = split_protocol(str(name))
        if scheme is None or not bucket or "/" in bucket.rstrip("/"):
            raise BucketsError(f"{path}: key {name!r}: give 'protocol://bucket' (e.g. 's3://my-bucket')")
        if not isinstance(entry, dict):
            raise BucketsError(f"{path}: bucket {name!r}: its entry must be a mapping")
        unknown = sorted(set(entry) - set(ENTRY_KEYS))
        if unknown:
            raise BucketsError(f"{path}: bucket {name!r}: unknown key(s) {unknown}; known: {', '.join(ENTRY_KEYS)}")
        table[f"{CANONICAL_PROTOCOL.get(scheme, scheme)}://{bucket.rstrip('/')}"] = dict(entry)
    with _lock:
        _cache[(path, mtime)] = table
    return table


def bucket_options(protocol: str, url: str) -> dict[str, Any] | None:
    """The fsspec options of ``url``'s bucket from the buckets file; None when no file is in use or it says
    nothing about ``protocol``. Raises :class:`BucketsError` for a bucket it should list and does not."""
    path = buckets_file()
    if not path:
        return None
    table = _load(path)
    listed = [name for name in table if name.startswith(f"{protocol}://")]
    if not listed:
        return None
    bucket = split_protocol(url)[1].split("/", 1)[0]
    name = f"{protocol}://{bucket}"
    entry = table.get(name, table.get(f"{protocol}://*"))
    if entry is None:
        raise BucketsError(f"{path}: no entry for bucket '{name}' (listed: {', '.join(sorted(listed))}): add one, "
                           f"or a '{protocol}://*' entry for the other buckets")
    return _options(protocol, name, entry, path)


def _options(protocol: str, name: str, entry: dict[str, Any], path: str) -> dict[str, Any]:
    options: dict[str, Any] = dict(entry.get("options") or {})
    region = entry.get("region")
    endpoint = entry.get("endpoint")
    if protocol == "oss":
        if not endpoint and region:
            endpoint = f"https://oss-{region}.aliyuncs.com"  # the bucket URL's host names the region
        if endpoint:
            options["endpoint"] = endpoint
    else:
        if endpoint:
            options["endpoint_url"] = endpoint
        if region:
            options["client_kwargs"] = {**options.get("client_kwargs", {}), "region_name": region}
    options.update(_credentials(protocol, name, entry.get("credentials") or {}, path))
    return options


def _credentials(protocol: str, name: str, source: dict[str, Any], path: str) -> dict[str, Any]:
    where = f"{path}: bucket '{name}'"
    if not isinstance(source, dict) or set(source) - set(SOURCES):
        raise BucketsError(f"{where}: credentials must be a mapping of {', '.join(SOURCES)}")
    inline = {k: source[k] for k in ("key", "secret", "token") if source.get(k)}
    if inline:
        mode = stat.S_IMODE(os.stat(path).st_mode)
        if mode & 0o077:
            raise BucketsError(f"{where}: credentials written in the file, which others can read (mode {mode:o}): "
                               f"chmod 600 {path}, or name environment variables (credentials: {{env: {{key: VAR, "
                               "secret: VAR}})")
        return inline
    if "env" in source:
        names = source["env"]
        if not isinstance(names, dict) or not names:
            raise BucketsError(f"{where}: credentials.env maps key/secret/token to environment variable names")
        values = {}
        for field, var in names.items():
            if not os.environ.get(str(var)):
                raise BucketsError(f"{where}: environment variable {var} (credentials.env.{field}) is not set")
            values[field] = os.environ[str(var)]
        return values
    if source.get("anonymous"):
        return {"anon": True}
    if "profile" in source:
        if protocol == "oss":
            return _aliyun_profile(str(source["profile"]), source.get("profile_file") or ALIYUN_CONFIG, where)
        return {"profile": str(source["profile"])}
    return {}  # no source: the backend's own (AWS_* variables, instance roles...)


def _aliyun_profile(profile: str, config: str, where: str) -> dict[str, Any]:
    """key/secret/token of a profile of the Alibaba Cloud CLI's config.json (modes AK and StsToken)."""
    path = os.path.expanduser(config)
    try:
        with builtins.open(path, encoding="utf-8") as f:
            profiles = json.load(f).get("profiles", [])
    except (OSError, ValueError) as e:
        raise BucketsError(f"{where}: cannot read profile {profile!r} from {path}: {type(e).__name__}") from None
    found = next((p for p in profiles if p.get("name") == profile), None)
    if found is None or not found.get("access_key_id"):
        raise BucketsError(f"{where}: no profile {profile!r} with an access key in {path}")
    values = {"key": found["access_key_id"], "secret": found.get("access_key_secret", "")}
    if found.get("sts_token"):
        values["token"] = found["sts_token"]
    return values


def secret_values() -> set[str]:
    """Every credential value the buckets file resolves to, for redaction (errors are left to the access)."""
    path = buckets_file()
    if not path:
        return set()
    values: set[str] = set()
    try:
        table = _load(path)
    except (BucketsError, OSError):
        return values
    for name, entry in table.items():
        try:
            options = _options(split_protocol(name)[0] or "", name, entry, path)
        except (BucketsError, OSError):
            continue
        values.update(str(options[k]) for k in ("key", "secret", "token") if options.get(k))
    return {v for v in values if len(v) >= 4}
