"""A remote cache entry's metadata: its format, its checks and its signature.

An entry's meta names the stage and key, the digest of its files, each file's sha256 and
size, and the key material. Everything in it comes from a store others can write, so it
is read within size and depth limits (core.boundedjson) and checked field by field before
any blob is fetched: a path never escapes the entry's directory, the digest is the digest
of the files, the material hashes to the key.

Those checks prove an entry consistent, not honest: anyone who may write the remote can
put any bytes under a real key, with a consistent meta. Two things prove more:
- edgebuild.lock: a locked stage's digest is expected, and an entry with another one is
  refused before it is fetched (remote.Remote.fetch);
- a signature: with `EDGEBUILD_REMOTE_KEY` set (a secret shared by whoever may write,
  typically CI only), every pushed meta carries an HMAC-SHA256 over (format, stage, key,
  digest), and every fetched one must carry a valid one. A writer without the secret cannot
  make an entry a keyed reader uses. The digest covers every file's name and sha256, and
  each blob is checked against its sha256, so the signature covers every byte.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
from dataclasses import dataclass, replace
from pathlib import PurePosixPath
from typing import cast

from edgebuild.build.cache import KeyMaterial, canonical, digest_of, key_of
from edgebuild.core import boundedjson

FORMAT = 1
KEY_ENV = "EDGEBUILD_REMOTE_KEY"  # the signing secret: from the environment only
MAX_META_BYTES = 16 * 1024 * 1024  # key material and file lists: kilobytes in practice
MAX_BLOB_BYTES = 2 * 1024 * 1024 * 1024  # one artifact file (data.npz of a large dataset)
MAX_FILES = 100_000
_HEX64 = re.compile(r"[0-9a-f]{64}")


class Corrupt(Exception):
    """A remote entry that failed verification: `what` names the blob (or the meta)."""

    def __init__(self, what: str, why: str, blob: str | None = None) -> None:
        super().__init__(f"{what}: {why}")
        self.blob = blob


@dataclass(frozen=True)
class Meta:
    stage: str
    key: str
    digest: str
    files: dict[str, str]
    sizes: dict[str, int]
    material: KeyMaterial
    signature: str | None = None  # hex HMAC-SHA256 of `signed_part`, when pushed with a key

    def to_bytes(self) -> bytes:
        """Canonical JSON: two machines pushing the same entry write the same bytes."""
        body: dict[str, object] = {"format": FORMAT, "stage": self.stage, "key": self.key,
                                   "digest": self.digest, "files": self.files,
                                   "sizes": self.sizes, "material": self.material}
        if self.signature is not None:
            body["signature"] = self.signature
        return canonical(body)

    def signed_part(self) -> bytes:
        return canonical({"format": FORMAT, "stage": self.stage, "key": self.key,
                          "digest": self.digest})


def secret() -> bytes | None:
    """The signing secret, if this environment has one."""
    value = os.environ.get(KEY_ENV)
    return value.encode() if value else None


def sign(meta: Meta, key: bytes | None) -> Meta:
    if key is None:
        return meta
    return replace(meta, signature=hmac.new(key, meta.signed_part(), hashlib.sha256).hexdigest())


def check_signature(meta: Meta, key: bytes | None) -> None:
    """With a secret configured, only entries signed with it are used."""
    if key is None:
        return
    if meta.signature is None:
        raise Corrupt("meta", f"not signed, and {KEY_ENV} is set: only signed entries are "
                      "used (an entry pushed without the key, or planted)")
    expected = hmac.new(key, meta.signed_part(), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, meta.signature):
        raise Corrupt("meta", f"its signature does not match {KEY_ENV} (signed with another "
                      "key, or planted)")


def parse(raw: bytes, stage: str, key: str) -> Meta:
    """A remote meta checked field by field (raises Corrupt): nothing of it reaches the
    local cache unchecked, a path in it never escapes the entry's directory."""
    try:
        meta = boundedjson.loads(raw, max_bytes=MAX_META_BYTES)
    except ValueError as exc:  # UnicodeDecodeError and the limits included
        raise Corrupt("meta", f"not JSON within the limits ({exc})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise Corrupt("meta", f"not a format-{FORMAT} entry")
    if meta.get("stage") != stage or meta.get("key") != key:
        raise Corrupt("meta", "stage or key differs from its path")
    files, sizes = _files(meta.get("files")), _sizes(meta.get("sizes"))
    if set(sizes) != set(files):
        raise Corrupt("meta", "sizes do not name the same files as files")
    digest = meta.get("digest")
    if not isinstance(digest, str) or digest != digest_of(files):
        raise Corrupt("meta", "digest is not the digest of its files")
    signature = meta.get("signature")
    if signature is not None and not (isinstance(signature, str) and _HEX64.fullmatch(signature)):
        raise Corrupt("meta", "signature is not a hex HMAC-SHA256")
    return Meta(stage, key, digest, files, sizes, _material(meta.get("material"), stage, key),
                signature)


def _files(value: object) -> dict[str, str]:
    if not isinstance(value, dict):
        raise Corrupt("meta", "files is not an object")
    if len(value) > MAX_FILES:
        raise Corrupt("meta", f"more than {MAX_FILES} files")
    for rel, sha in value.items():
        if not (isinstance(sha, str) and _HEX64.fullmatch(sha)):
            raise Corrupt("meta", f"file {rel!r}: not a sha256")
        _check_relpath(rel)
    parents = {str(p) for rel in value for p in PurePosixPath(rel).parents}
    if parents & set(value):
        raise Corrupt("meta", "a file is also a directory of another")
    return cast(dict[str, str], value)


def _check_relpath(rel: str) -> None:
    path = PurePosixPath(rel)
    if (not rel or path.is_absolute() or path.as_posix() != rel or "\\" in rel or "\0" in rel
            or any(part in (".", "..") for part in path.parts)):
        raise Corrupt("meta", f"file {rel!r}: not a plain relative path")


def _sizes(value: object) -> dict[str, int]:
    if not isinstance(value, dict) or not all(
            isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= MAX_BLOB_BYTES
            for n in value.values()):
        raise Corrupt("meta", f"sizes is not an object of byte counts up to {MAX_BLOB_BYTES}")
    return cast(dict[str, int], value)


def _material(value: object, stage: str, key: str) -> KeyMaterial:
    """The key material must hash to the key: what `status` explains is what was built."""
    if not isinstance(value, dict) or value.get("stage") != stage:
        raise Corrupt("meta", "material is not this stage's key material")
    material = cast(KeyMaterial, value)
    if key_of(material) != key:
        raise Corrupt("meta", "material does not hash to the key")
    return material
