"""A shared remote cache over fsspec: a local directory, s3://, memory://, sftp://, ...

Layout below the URL (format 1):

    v1/blobs/<sha[:2]>/<sha>                   one file's bytes, named by their sha256
    v1/entries/<stage>/<key[:2]>/<key>.json    an entry: digest, files, sizes, key material
    v1/probe/                                  write probes, deleted right away

Blobs are content-addressed, so two machines pushing the same artifact write the same
bytes to the same names and identical files are stored once; an entry's meta is written
after all its blobs, so a reader that sees a meta finds its blobs. Every upload is atomic
(one put on an object store; a temp file and a rename where there is a rename).

Nothing read from the remote is trusted: `fetch` reads the meta within size and depth
limits and checks it field by field (build.remotemeta), checks its signature when a
signing key is set and its digest against edgebuild.lock's when the lock names the key,
re-hashes every blob, runs the stage's own checks on the files (their schemas), and only
then publishes into the local cache — a rejected remote entry is a miss (the stage is
built) and one warning line, never an error, and nothing of it is kept.
`RemoteError` is for access failures only: unreachable, credentials, no such bucket.
Credentials come from fsspec's and the driver's own configuration, never from edgebuild.

fsspec is imported only when a remote is used: a no-op build never pays for it.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import os
import shutil
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast

from edgebuild.build import remotemeta
from edgebuild.build.cache import Cache, Entry, digest_of, manifest_of
from edgebuild.build.remotemeta import Corrupt, Meta

_T = TypeVar("_T")
# S3 fails fast. s3fs's defaults (5 tries of botocore's 5 attempts, 15 s read timeout)
# held `probe` on a server that accepts but never answers for over 8 minutes; here 2
# attempts (5 s to connect, 10 s per read): 21 s. max_concurrency 1 = one GET per read (no
# size request first; the blobs are small). fsspec's configuration wins, key by key.
S3_CONFIG: dict[str, object] = {"connect_timeout": 5, "read_timeout": 10,
                                "retries": {"total_max_attempts": 2}}
S3_RETRIES = 1  # s3fs's own loop around botocore's (an attribute, no fsspec setting)
_FILE_PROTOCOLS = frozenset({"file", "local"})  # rename, and link = atomic create
_RENAME_PROTOCOLS = frozenset({"sftp", "ssh"})  # rename, no link
_CREATE_PROTOCOLS = frozenset({"s3", "s3a", "memory"})  # put with mode="create" is atomic
# S3 error codes that mean "these credentials may not do this"
_DENIED_CODES = frozenset({"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                           "ExpiredToken", "InvalidToken", "TokenRefreshRequired",
                           "AllAccessDisabled", "AccountProblem", "403", "Forbidden"})
_NO_CREDENTIALS = frozenset({"NoCredentialsError", "PartialCredentialsError"})
_LOST_RACE_CODES = frozenset({"PreconditionFailed", "ConditionalRequestConflict"})
# (module, exception names) of the drivers: what they raise for "cannot reach or use the
# remote" besides OSError. Looked up only among loaded modules (see `_access_errors`).
_DRIVER_ERRORS = (("botocore.exceptions", ("BotoCoreError", "ClientError")),
                  ("aiohttp", ("ClientError",)), ("paramiko", ("SSHException",)))

# Blobs `fetch` found bad, per remote URL, for this process: `push` re-uploads them even
# though a blob of the right size is there (a tampered blob can keep its size).
_BAD_BLOBS: dict[str, set[str]] = {}


class RemoteError(Exception):
    """The remote cannot be used (unreachable, credentials, no such bucket or directory):
    one line with what, the URL, the cause and what to do. `denied` = the credentials or
    permissions refused the operation (a read-only remote refuses writes)."""

    def __init__(self, message: str, denied: bool = False) -> None:
        super().__init__(message)
        self.denied = denied


@dataclass(frozen=True)
class RemoteEntry:
    """One entry of the remote, for `cache ls`."""

    stage: str
    key: str
    digest: str
    size: int  # bytes of all its files
    files: int


class _FileSystem(Protocol):
    """The part of fsspec's AbstractFileSystem used here (fsspec ships no types)."""

    protocol: str | tuple[str, ...]

    def cat_file(self, path: str, start: int | None = None, end: int | None = None
                 ) -> bytes: ...
    def cat(self, path: list[str], on_error: str, start: int | None = None,
            end: int | None = None) -> dict[str, bytes | Exception]: ...
    def pipe_file(self, path: str, value: bytes, **kwargs: Any) -> object: ...
    def info(self, path: str) -> dict[str, Any]: ...
    def isdir(self, path: str) -> bool: ...
    def exists(self, path: str) -> bool: ...
    def find(self, path: str) -> list[str]: ...
    def makedirs(self, path: str, exist_ok: bool) -> None: ...
    def mv(self, path1: str, path2: str) -> None: ...
    def rm_file(self, path: str) -> None: ...


@dataclass(frozen=True)
class Remote:
    """A remote cache at `url`: any fsspec URL (s3://bucket/prefix, memory://name,
    sftp://host/dir, file://...) or a plain local directory path. Opened on first use;
    its endpoint and credentials come from fsspec's configuration."""

    url: str

    def __post_init__(self) -> None:
        # a plain path is a local directory, absolute so that a later chdir changes nothing
        if "://" not in self.url:
            object.__setattr__(self, "url", os.path.abspath(os.path.expanduser(self.url)))

    # -- the API -------------------------------------------------------------------------

    def probe(self, write: bool = True) -> bool:
        """True = readable and writable, False = readable only (restores, no pushes; also
        what a read-only probe, `write=False`, answers without trying to write). Raises
        RemoteError when it cannot be read at all, so that a wrong endpoint, credentials or
        bucket is one line before a build rather than a miss per stage."""
        _, root = self._location
        if self._kind != "object":  # a mistyped or unmounted directory is not a new remote
            with self._access("opening its directory"):
                if not self._fs.isdir(root):
                    raise FileNotFoundError(errno.ENOENT, "no such directory", root)
        self._read(f"{root}/v1/probe/absent", "probing it")  # endpoint, credentials, bucket
        if not write:
            return False
        probe = f"{root}/v1/probe/{uuid.uuid4().hex}"
        try:
            self._write(probe, b"edgebuild probe\n")
        except RemoteError as exc:
            if exc.denied:
                return False
            raise
        with contextlib.suppress(RemoteError):  # a leftover probe harms nobody
            self._remove(probe)
        return True

    def fetch(self, cache: Cache, stage: str, key: str, expect: str | None = None,
              accept: Callable[[Path], None] | None = None) -> Entry | None:
        """The remote's entry for `key`, verified and published into `cache`; None when
        the remote has none, or one that fails a check (then a warning says what, and the
        caller builds the stage). `expect`: the digest edgebuild.lock records for this key,
        checked before anything is downloaded. `accept(out)`: the stage's own checks of
        the downloaded files, run before they are published (raising rejects them). Needs
        a writable local cache (else None: nothing to publish into)."""
        raw = self._read_meta(self._meta_path(stage, key))
        if raw is None or not cache.writable:
            return None
        try:
            meta = remotemeta.parse(raw, stage, key)
            remotemeta.check_signature(meta, remotemeta.secret())
            if expect is not None and meta.digest != expect:
                raise Corrupt("entry", f"digest {meta.digest[:16]}, but edgebuild.lock "
                              f"records {expect[:16]} for this key")
            entry, _ = cache.publish(stage, key, meta.material, functools.partial(
                self._download, meta, accept), origin=self.url)
        except Corrupt as exc:
            if exc.blob is not None:
                self._bad.add(exc.blob)
            self._warn(stage, key, f"{exc}; not used, the stage is built instead")
            return None
        return entry

    def push(self, entry: Entry) -> bool:
        """Upload `entry`: blobs first, its meta last. True = the meta was uploaded; False
        = the remote already had this key (with the same digest: nothing to do beyond
        re-uploading blobs a fetch found bad; with another digest: a warning, and the
        remote keeps the first). Raises RemoteError when it may not write (read-only).
        A local file that no longer matches its entry is not uploaded (a warning)."""
        try:
            return self._push(entry)
        except Corrupt as exc:
            self._warn(entry.stage, entry.key, f"local {exc}; not pushed (run `edgebuild "
                       "cache verify`)")
            return False

    def _push(self, entry: Entry) -> bool:
        present, existing = self._existing(entry.stage, entry.key)
        if existing is not None:
            self._settle(entry, existing)
            return False
        sizes = {rel: self._upload(entry, rel, sha) for rel, sha in entry.files.items()}
        meta = remotemeta.sign(Meta(entry.stage, entry.key, entry.digest, dict(entry.files),
                                    sizes, entry.material), remotemeta.secret())
        # a malformed meta is replaced; else only created, so the first pusher's stays
        if self._write(self._meta_path(entry.stage, entry.key), meta.to_bytes(),
                       exclusive=not present):
            return True
        _, existing = self._existing(entry.stage, entry.key)  # lost a race: whose is it?
        if existing is not None:
            self._settle(entry, existing)
        return False

    def entries(self) -> list[RemoteEntry]:
        """Every well-formed entry on the remote (malformed metas are skipped)."""
        base = f"{self._location[1]}/v1/entries"
        paths = [p for p in self._list(base) if p.endswith(".json")]
        found = []
        for path, raw in sorted(self._read_many(paths).items()):
            stage, prefix, name = path.rsplit("/", 3)[-3:]
            key = name.removesuffix(".json")
            if prefix != key[:2]:
                continue
            try:
                meta = remotemeta.parse(raw, stage, key)
            except Corrupt:
                continue
            found.append(RemoteEntry(stage, key, meta.digest, sum(meta.sizes.values()),
                                     len(meta.files)))
        return found

    # -- entries ---------------------------------------------------------------------------

    def _meta_path(self, stage: str, key: str) -> str:
        return f"{self._location[1]}/v1/entries/{stage}/{key[:2]}/{key}.json"

    def _blob_path(self, sha: str) -> str:
        return f"{self._location[1]}/v1/blobs/{sha[:2]}/{sha}"

    @property
    def _bad(self) -> set[str]:
        return _BAD_BLOBS.setdefault(self.url, set())

    def _download(self, meta: Meta, accept: Callable[[Path], None] | None, out: Path) -> None:
        """`cache.publish`'s build: each verified blob into `out`, one in memory at a
        time, then the whole checked once more; a raised Corrupt makes publish discard the
        lot before anything is published."""
        written: dict[str, Path] = {}  # sha -> its first copy: a blob is fetched once
        for rel, sha in sorted(meta.files.items()):
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if sha in written:
                shutil.copyfile(written[sha], target)
            else:
                target.write_bytes(self._verified_blob(rel, sha, meta.sizes[rel]))
                written[sha] = target
        if digest_of(manifest_of(out)) != meta.digest:  # defense in depth: each blob was hashed
            raise Corrupt("entry", "its files do not give its digest")
        if accept is not None:
            try:
                accept(out)
            except Exception as exc:  # the stage's contract: schemas of its JSON artifacts
                raise Corrupt("entry", f"its files fail the stage's checks ({exc})") from None

    def _verified_blob(self, rel: str, sha: str, size: int) -> bytes:
        data = self._read(self._blob_path(sha), limit=size)  # a longer blob: size + 1 bytes
        what = f"blob {sha[:16]} ({rel})"
        if data is None:
            raise Corrupt(what, "missing", sha)
        if len(data) != size:
            raise Corrupt(what, f"has {len(data)} bytes, its meta says {size} (truncated?)",
                           sha)
        if hashlib.sha256(data).hexdigest() != sha:
            raise Corrupt(what, "content does not match its sha256 (tampered?)", sha)
        return data

    def _existing(self, stage: str, key: str) -> tuple[bool, Meta | None]:
        """(is there a meta for the key, that meta if well-formed)."""
        raw = self._read_meta(self._meta_path(stage, key))
        if raw is None:
            return False, None
        try:
            meta = remotemeta.parse(raw, stage, key)
            remotemeta.check_signature(meta, remotemeta.secret())  # unsigned: replaced
        except Corrupt:
            return True, None
        return True, meta

    def _settle(self, entry: Entry, existing: Meta) -> None:
        """The remote has the key already: repair blobs a fetch found bad, or warn."""
        if existing.digest != entry.digest:
            self._warn(entry.stage, entry.key, f"the remote has digest {existing.digest[:16]} "
                       f"for this key, this build made {entry.digest[:16]}: same key, other "
                       "bytes (a nondeterministic stage or another machine); the remote "
                       "keeps the first")
            return
        for rel, sha in entry.files.items():
            if sha in self._bad:
                self._upload(entry, rel, sha)

    def _upload(self, entry: Entry, rel: str, sha: str) -> int:
        """Put one file's blob unless the remote has it (right size, not known bad);
        its size. The local file is hashed first: a corrupt local cache poisons nothing."""
        local = entry.out / rel
        path = self._blob_path(sha)
        if sha not in self._bad and self._size(path) == local.stat().st_size:
            return local.stat().st_size
        data = local.read_bytes()
        if hashlib.sha256(data).hexdigest() != sha:
            raise Corrupt(f"file {local}", "content does not match its entry's sha256")
        self._write(path, data)
        self._bad.discard(sha)
        return len(data)

    def _warn(self, stage: str, key: str, message: str) -> None:
        print(f"warning: remote cache {self.url}: {stage} entry {key[:16]}: {message}",
              file=sys.stderr, flush=True)

    # -- the filesystem ------------------------------------------------------------------

    @functools.cached_property
    def _location(self) -> tuple[_FileSystem, str]:
        """(filesystem, root path). fsspec's configuration (files in ~/.config/fsspec,
        FSSPEC_* variables) supplies endpoints and credentials; nothing is passed here
        but S3's fail-fast retry settings."""
        from fsspec.core import url_to_fs  # type: ignore[import-untyped]

        try:
            fs, root = url_to_fs(self.url, **_options(self.url))
        except (ImportError, ValueError) as exc:  # unknown protocol, driver not installed
            raise RemoteError(f"remote cache {self.url}: cannot open it ({_one_line(exc)}); "
                              "fix the URL or install fsspec's driver for its protocol") from None
        if _options(self.url):  # S3: its instance is keyed by our options, nobody else's
            fs.retries = S3_RETRIES
        return cast(_FileSystem, fs), str(root).rstrip("/")

    @property
    def _fs(self) -> _FileSystem:
        return self._location[0]

    @functools.cached_property
    def _protocols(self) -> frozenset[str]:
        protocol = self._fs.protocol
        return frozenset({protocol} if isinstance(protocol, str) else protocol)

    @functools.cached_property
    def _kind(self) -> Literal["file", "rename", "object"]:
        """How an upload is made atomic: `file` (temp, then rename or link), `rename`
        (temp, then rename), `object` (one put)."""
        if self._protocols & _FILE_PROTOCOLS:
            return "file"
        return "rename" if self._protocols & _RENAME_PROTOCOLS else "object"

    @contextlib.contextmanager
    def _access(self, doing: str) -> Iterator[None]:
        """Turn the driver's exceptions into one RemoteError line."""
        try:
            yield
        except _access_errors() as exc:
            what, advice, denied = _diagnose(exc, sorted(self._protocols)[0])
            raise RemoteError(f"remote cache {self.url}: {what} while {doing} "
                              f"({_one_line(exc)}); {advice}", denied=denied) from exc

    def _absent_ok(self, doing: str, call: Callable[[], _T]) -> _T | None:
        """`call()`, or None for a missing object (a missing bucket is an access failure)."""
        with self._access(doing):
            try:
                return call()
            except FileNotFoundError as exc:
                if _code(exc) == "NoSuchBucket":
                    raise
                return None

    def _read(self, path: str, doing: str | None = None, limit: int | None = None
              ) -> bytes | None:
        """The object's bytes, or None when absent; with `limit`, at most `limit` + 1 of
        them (a longer object is then seen to be longer, without being read whole)."""
        doing = doing or f"reading {self._relative(path)}"
        if limit is None:
            return self._absent_ok(doing, lambda: bytes(self._fs.cat_file(path)))
        return self._absent_ok(doing, lambda: self._first_bytes(path, limit + 1))

    def _first_bytes(self, path: str, count: int) -> bytes:
        """At most `count` bytes of an object. S3 answers a range request on an empty
        object with 416 (not satisfiable): an empty object is then read as empty."""
        try:
            return bytes(self._fs.cat_file(path, start=0, end=count))
        except _access_errors():
            if self._fs.info(path).get("size") == 0:
                return b""
            raise

    def _read_meta(self, path: str) -> bytes | None:
        return self._read(path, limit=remotemeta.MAX_META_BYTES)

    def _size(self, path: str) -> int | None:
        return self._absent_ok(f"reading {self._relative(path)}",
                               lambda: int(self._fs.info(path)["size"]))

    def _list(self, path: str) -> list[str]:
        return self._absent_ok("listing the entries", lambda: sorted(self._fs.find(path))) or []

    def _read_many(self, paths: list[str]) -> dict[str, bytes]:
        if not paths:
            return {}
        with self._access("reading the entries"):
            found = self._fs.cat(paths, on_error="return", start=0,
                                 end=remotemeta.MAX_META_BYTES + 1)
            for value in found.values():  # a meta deleted meanwhile is fine, the rest not
                if isinstance(value, Exception) and not isinstance(value, FileNotFoundError):
                    raise value
        return {path: bytes(v) for path, v in found.items() if not isinstance(v, Exception)}

    def _remove(self, path: str) -> None:
        with self._access(f"deleting {self._relative(path)}"):
            self._fs.rm_file(path)

    def _write(self, path: str, data: bytes, exclusive: bool = False) -> bool:
        """Put `data` at `path` atomically; False when `exclusive` and something is
        there already (then nothing was written)."""
        with self._access(f"writing {self._relative(path)}"):
            if self._kind == "object":
                return self._put(path, data, exclusive)
            return self._put_by_rename(path, data, exclusive)

    def _put(self, path: str, data: bytes, exclusive: bool) -> bool:
        if not exclusive or not self._protocols & _CREATE_PROTOCOLS:
            if exclusive and self._fs.exists(path):  # check, then put: the later one wins
                return False
            self._fs.pipe_file(path, data)
            return True
        try:
            self._fs.pipe_file(path, data, mode="create")
        except _access_errors() as exc:  # FileExistsError is an OSError
            if isinstance(exc, FileExistsError) or _code(exc) in _LOST_RACE_CODES:
                return False
            raise
        return True

    def _put_by_rename(self, path: str, data: bytes, exclusive: bool) -> bool:
        fs = self._fs
        fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        temp = f"{path}.tmp-{uuid.uuid4().hex}"
        fs.pipe_file(temp, data)
        placed = False
        try:
            placed = self._place(temp, path, exclusive)
        finally:
            if not placed or (self._kind == "file" and exclusive):  # linked: still there
                with contextlib.suppress(*_access_errors()):
                    fs.rm_file(temp)
        return placed

    def _place(self, temp: str, path: str, exclusive: bool) -> bool:
        fs = self._fs
        if exclusive and self._kind == "file":
            try:
                cast(Any, fs).link(temp, path)  # LocalFileSystem's os.link: atomic create
            except FileExistsError:
                return False
            return True
        if exclusive and fs.exists(path):  # sftp: check, then rename
            return False
        fs.mv(temp, path)
        return True

    def _relative(self, path: str) -> str:
        return path.removeprefix(self._location[1]).lstrip("/")


# -- errors --------------------------------------------------------------------------------

def _options(url: str) -> dict[str, object]:
    """url_to_fs arguments: S3's fail-fast settings under the user's own (see S3_CONFIG;
    fsspec lets explicit arguments replace its configuration's, so they are merged here)."""
    if not url.startswith(("s3://", "s3a://")):
        return {}
    import fsspec.config  # type: ignore[import-untyped]

    configured = fsspec.config.conf.get("s3", {})
    options: dict[str, object] = {"max_concurrency": configured.get("max_concurrency", 1)}
    if isinstance(configured.get("config_kwargs", {}), dict):
        options["config_kwargs"] = {**S3_CONFIG, **configured.get("config_kwargs", {})}
    return options


def _access_errors() -> tuple[type[BaseException], ...]:
    """What a driver raises when the remote cannot be reached or used. Only loaded
    modules are looked at: a driver never imported raised nothing."""
    found: list[type[BaseException]] = [OSError]  # incl. timeouts, ConnectionError
    for module_name, names in _DRIVER_ERRORS:
        module = sys.modules.get(module_name)
        found += [getattr(module, name) for name in names if hasattr(module, name)]
    return tuple(found)


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    for _ in range(16):  # an exception, its cause, the cause's cause...
        if exc is None:
            return
        yield exc
        exc = exc.__cause__ or exc.__context__


def _code(exc: BaseException) -> str | None:
    """The S3 error code behind an exception (s3fs keeps botocore's error as the cause)."""
    for link in _chain(exc):
        response = getattr(link, "response", None)
        if isinstance(response, dict):
            return str(response.get("Error", {}).get("Code"))
    return None


def _diagnose(exc: BaseException, protocol: str) -> tuple[str, str, bool]:
    """(what went wrong, what to do, whether it is a refusal) for an access failure."""
    code = _code(exc)
    names = {type(link).__name__ for link in _chain(exc)}
    if code in _DENIED_CODES or names & _NO_CREDENTIALS or isinstance(exc, PermissionError):
        return "access denied", _advice("credentials", protocol), True
    if isinstance(exc, OSError) and exc.errno == errno.EROFS:
        return "read-only file system", "push from a machine that may write it", True
    if code == "NoSuchBucket":
        return "no such bucket", "create it, or fix the URL", False
    if isinstance(exc, FileNotFoundError):
        return "not found", "create it, or fix the URL", False
    if names & {"ReadTimeoutError", "SocketTimeoutError"}:
        return "no answer in time", _advice("endpoint", protocol), False
    if code is None and (isinstance(exc, ConnectionError | TimeoutError)
                         or names & {"EndpointConnectionError", "ConnectTimeoutError",
                                     "ClientConnectorError", "gaierror"}):
        return "unreachable", _advice("endpoint", protocol), False
    return "failed", _advice("endpoint", protocol), False


def _advice(about: Literal["credentials", "endpoint"], protocol: str) -> str:
    if protocol in ("s3", "s3a"):
        return {"credentials": "wrong or missing credentials, or they may not do this: "
                "fsspec/AWS configuration, e.g. AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, "
                "AWS_PROFILE or ~/.config/fsspec/s3.json",
                "endpoint": "check the endpoint (FSSPEC_S3_ENDPOINT_URL, or endpoint_url in "
                "~/.config/fsspec/s3.json) and the network"}[about]
    return {"credentials": "check this user's permissions there, or the credentials in "
            f"fsspec's configuration (~/.config/fsspec/{protocol}.json or "
            f"FSSPEC_{protocol.upper()}_* variables)",
            "endpoint": "check the URL, the host and the network"}[about]


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
