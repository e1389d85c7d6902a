"""The shared remote cache (edgebuild/build/remote.py) on a local directory, on fsspec's
in-memory filesystem and on S3 (moto's server mode, IAM enforced: tests/s3server.py).

Read-only S3 is a real IAM user whose policy allows only s3:GetObject/ListBucket; wrong
credentials are an unknown access key and a wrong secret. A read-only *directory* is not
tested: tests run as root in CI, and chmod does not stop root.

A push that the remote refuses (read-only) raises RemoteError with `denied` set: the caller
asked for a write that cannot happen, so it hears about it (probe() says so beforehand).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from s3server import Keys, S3Server, configure, configured, running

from edgebuild.build.cache import Cache, Entry, digest_of, key_of
from edgebuild.build.remote import Remote, RemoteError

REPO = Path(__file__).resolve().parent.parent
STAGE = "quantize"
FILES = {
    "weights.npz": b"\x00\x01integer weights" * 40,
    "copy.npz": b"\x00\x01integer weights" * 40,  # same bytes: one blob
    "sub/dir/plan.json": b'{"arena": 1024}\n',
    "empty.txt": b"",
}


def material(stage: str = STAGE, bits: int = 8) -> dict:
    return {"stage": stage, "code": "0" * 64, "config": {"bits": bits},
            "upstream": {"validate": "ab" * 32}, "tools": {"numpy": "2.0.0"}}


def make_entry(root: Path, files: dict[str, bytes] = FILES, stage: str = STAGE,
               bits: int = 8) -> Entry:
    """A local cache entry built the way a stage's is: Cache.publish with a build callback."""
    def build(out: Path) -> None:
        for rel, data in files.items():
            (out / rel).parent.mkdir(parents=True, exist_ok=True)
            (out / rel).write_bytes(data)

    found = material(stage, bits)
    entry, built = Cache(root).publish(stage, key_of(found), found, build)
    assert built
    return entry


def contents(entry: Entry) -> dict[str, bytes]:
    return {p.relative_to(entry.out).as_posix(): p.read_bytes()
            for p in sorted(entry.out.rglob("*")) if p.is_file()}


def remote_fs(remote: Remote) -> tuple:
    """The remote's filesystem, opened independently of the code under test."""
    import fsspec.core

    fs, root = fsspec.core.url_to_fs(remote.url)
    return fs, root.rstrip("/")


def put(remote: Remote, path: str, data: bytes) -> None:
    """Write an object on the remote behind edgebuild's back."""
    fs, _ = remote_fs(remote)
    fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
    fs.pipe_file(path, data)


def blob(remote: Remote, sha: str) -> str:
    return f"{remote_fs(remote)[1]}/v1/blobs/{sha[:2]}/{sha}"


def meta_path(remote: Remote, entry: Entry) -> str:
    return f"{remote_fs(remote)[1]}/v1/entries/{entry.stage}/{entry.key[:2]}/{entry.key}.json"


def left_in(cache_root: Path) -> list[str]:
    """Everything in a local cache but its lock files and stat records."""
    return sorted(str(p.relative_to(cache_root)) for p in cache_root.rglob("*")
                  if p.is_file() and p.parts[len(cache_root.parts)] not in ("locks", "stat"))


# --- fixtures ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def s3server() -> Iterator[S3Server]:
    """One moto server for the module; this process configured as its read-write user
    (the environment is restored afterwards)."""
    with running() as server, configured(server.env()):
        yield server


@pytest.fixture
def s3(s3server: S3Server) -> Iterator[S3Server]:
    """The S3 server, as the read-write user also after a test that switched users."""
    configure(s3server.env())
    yield s3server
    configure(s3server.env())


@pytest.fixture(params=["dir", "memory", "s3"])
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Remote:
    """An empty remote of each kind (a fresh prefix of the bucket for S3)."""
    if request.param == "dir":
        (tmp_path / "remote").mkdir()
        return Remote(str(tmp_path / "remote"))
    if request.param == "memory":
        return Remote(f"memory://edgebuild-{uuid.uuid4().hex}")
    server = request.getfixturevalue("s3")
    return Remote(f"{server.bucket_url}/{uuid.uuid4().hex}")


# --- round trip -------------------------------------------------------------------------


def test_round_trip(remote: Remote, tmp_path: Path) -> None:
    entry = make_entry(tmp_path / "a")
    assert remote.probe() is True
    assert remote.push(entry) is True
    assert remote.push(entry) is False  # already there: nothing to do

    fetched = remote.fetch(Cache(tmp_path / "b"), entry.stage, entry.key)

    assert fetched is not None
    assert fetched.path == Cache(tmp_path / "b").entry_path(entry.stage, entry.key)
    assert (fetched.digest, fetched.files, fetched.material) == (entry.digest, entry.files,
                                                                 entry.material)
    assert contents(fetched) == FILES
    assert Cache(tmp_path / "b").lookup(entry.stage, entry.key) == fetched


def test_a_plain_path_is_an_absolute_local_directory(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "remote").mkdir()
    monkeypatch.chdir(tmp_path)
    remote = Remote("remote")
    assert remote.url == str(tmp_path / "remote")
    assert remote.push(make_entry(tmp_path / "a")) is True
    assert (tmp_path / "remote" / "v1" / "entries" / STAGE).is_dir()


def test_fetch_of_an_unknown_key_is_none(remote: Remote, tmp_path: Path) -> None:
    remote.push(make_entry(tmp_path / "a"))
    assert remote.fetch(Cache(tmp_path / "b"), STAGE, "e" * 64) is None
    assert left_in(tmp_path / "b") == []


def test_entries_lists_every_well_formed_entry(remote: Remote, tmp_path: Path) -> None:
    first = make_entry(tmp_path / "a")
    second = make_entry(tmp_path / "a", {"plan.json": b"{}"}, stage="plan")
    assert remote.entries() == []
    remote.push(first)
    remote.push(second)
    broken = meta_path(remote, make_entry(tmp_path / "c", bits=4))
    put(remote, broken, b"{broken")  # a malformed meta at a valid path: skipped
    put(remote, broken.replace(".json", ".json.tmp-1234"), b"{}")  # an unfinished upload

    found = {(e.stage, e.key): e for e in remote.entries()}

    assert sorted(found) == sorted([(STAGE, first.key), ("plan", second.key)])
    listed = found[(STAGE, first.key)]
    assert (listed.digest, listed.files, listed.size) == (
        first.digest, 4, sum(len(data) for data in FILES.values()))
    assert (found[("plan", second.key)].size, found[("plan", second.key)].files) == (2, 1)


# --- corrupt remote entries ---------------------------------------------------------------


def test_a_tampered_blob_is_not_used_and_a_push_repairs_it(
        remote: Remote, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Same size, other bytes: only the hash tells. The fetch remembers the blob as bad,
    so the next push re-uploads it although a blob of the right size is there."""
    entry = make_entry(tmp_path / "a")
    remote.push(entry)
    sha = entry.files["sub/dir/plan.json"]
    fs, _ = remote_fs(remote)
    put(remote, blob(remote, sha), b'{"arena": 9999}\n')
    local = Cache(tmp_path / "b")

    assert remote.fetch(local, entry.stage, entry.key) is None

    warning = capsys.readouterr().err
    assert f"{STAGE} entry {entry.key[:16]}" in warning
    assert f"blob {sha[:16]} (sub/dir/plan.json)" in warning and "sha256" in warning
    assert len(warning.strip().splitlines()) == 1
    assert left_in(local.root) == []  # nothing published, no temp dir left

    assert remote.push(entry) is False  # the meta was there: only the bad blob goes up
    assert fs.cat_file(blob(remote, sha)) == FILES["sub/dir/plan.json"]
    fetched = remote.fetch(local, entry.stage, entry.key)
    assert fetched is not None and contents(fetched) == FILES


def test_a_truncated_blob_is_not_used_and_a_push_repairs_it(
        remote: Remote, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    entry = make_entry(tmp_path / "a")
    remote.push(entry)
    sha = entry.files["weights.npz"]
    fs, _ = remote_fs(remote)
    put(remote, blob(remote, sha), FILES["weights.npz"][:100])
    local = Cache(tmp_path / "b")

    assert remote.fetch(local, entry.stage, entry.key) is None

    warning = capsys.readouterr().err
    assert f"{STAGE} entry {entry.key[:16]}" in warning and f"blob {sha[:16]}" in warning
    assert "has 100 bytes" in warning
    assert left_in(local.root) == []
    # a fresh process (no memory of bad blobs) repairs it too: the size differs
    Remote(remote.url).push(entry)
    fetched = remote.fetch(local, entry.stage, entry.key)
    assert fetched is not None and contents(fetched) == FILES


def test_a_missing_blob_is_a_miss(remote: Remote, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    entry = make_entry(tmp_path / "a")
    remote.push(entry)
    remote_fs(remote)[0].rm_file(blob(remote, entry.files["empty.txt"]))

    assert remote.fetch(Cache(tmp_path / "b"), entry.stage, entry.key) is None
    assert "missing" in capsys.readouterr().err
    assert left_in(tmp_path / "b") == []


def _rehash(meta: dict) -> None:
    meta["digest"] = digest_of(meta["files"])


MALFORMED = {
    "not JSON": lambda meta: b"{not json",
    "another format": lambda meta: meta.update(format=2),
    "another key": lambda meta: meta.update(key="0" * 64),
    "wrong digest": lambda meta: meta.update(digest="f" * 64),
    "path escapes": lambda meta: (meta["files"].update({"../x": meta["files"].pop("empty.txt")}),
                                  meta["sizes"].update({"../x": meta["sizes"].pop("empty.txt")}),
                                  _rehash(meta)),
    "absolute path": lambda meta: (meta["files"].update({"/x": meta["files"].pop("empty.txt")}),
                                   meta["sizes"].update({"/x": meta["sizes"].pop("empty.txt")}),
                                   _rehash(meta)),
    "not a sha256": lambda meta: (meta["files"].update({"empty.txt": "xyz"}), _rehash(meta)),
    "no sizes": lambda meta: meta.pop("sizes"),
    "sizes of other files": lambda meta: meta["sizes"].update({"other.bin": 1}),
    "a file in a file": lambda meta: (meta["files"].update({"empty.txt/x": meta["files"]["empty.txt"]}),
                                      meta["sizes"].update({"empty.txt/x": 0}), _rehash(meta)),
    "negative size": lambda meta: meta["sizes"].update({"empty.txt": -1}),
    "material of another key": lambda meta: meta["material"]["config"].update(bits=4),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_meta_is_a_miss_and_a_push_replaces_it(
        case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "remote").mkdir()
    remote = Remote(str(tmp_path / "remote"))
    entry = make_entry(tmp_path / "a")
    remote.push(entry)
    fs, _ = remote_fs(remote)
    meta = json.loads(fs.cat_file(meta_path(remote, entry)))
    changed = MALFORMED[case](meta)
    put(remote, meta_path(remote, entry),
        changed if isinstance(changed, bytes) else json.dumps(meta).encode())
    local = Cache(tmp_path / "b")

    assert remote.fetch(local, entry.stage, entry.key) is None

    warning = capsys.readouterr().err
    assert f"{STAGE} entry {entry.key[:16]}: meta:" in warning
    assert left_in(local.root) == []
    assert remote.entries() == []
    assert remote.push(entry) is True  # a malformed meta is no entry: replaced
    fetched = remote.fetch(local, entry.stage, entry.key)
    assert fetched is not None and fetched.digest == entry.digest


def test_fetch_into_a_read_only_local_cache_is_a_miss(tmp_path: Path) -> None:
    """Nothing to publish into (the builder then builds without publishing)."""
    (tmp_path / "remote").mkdir()
    remote = Remote(str(tmp_path / "remote"))
    entry = make_entry(tmp_path / "a")
    remote.push(entry)
    (tmp_path / "file").write_bytes(b"")  # a cache below a file: unwritable, even for root
    assert remote.fetch(Cache(tmp_path / "file" / "cache"), entry.stage, entry.key) is None


# --- pushes -------------------------------------------------------------------------------


def test_a_meta_with_another_digest_is_not_overwritten(
        remote: Remote, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = make_entry(tmp_path / "a")
    other = make_entry(tmp_path / "other", {"weights.npz": b"other bytes"})
    assert other.key == first.key and other.digest != first.digest
    remote.push(first)

    assert remote.push(other) is False

    warning = capsys.readouterr().err
    assert f"{STAGE} entry {first.key[:16]}" in warning and "same key, other bytes" in warning
    fetched = remote.fetch(Cache(tmp_path / "b"), first.stage, first.key)
    assert fetched is not None and fetched.digest == first.digest
    assert contents(fetched) == FILES


def test_a_corrupt_local_entry_is_not_pushed(remote: Remote, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    entry = make_entry(tmp_path / "a")
    target = entry.out / "weights.npz"
    target.chmod(0o644)
    target.write_bytes(b"bit rot")

    assert remote.push(entry) is False
    assert "not pushed" in capsys.readouterr().err
    assert remote.entries() == []


def _push_in_child(url: str, cache_root: str, stage: str, key: str, barrier: object,
                   results: object) -> None:
    """One of two processes pushing the same entry at the same moment."""
    entry = Cache(Path(cache_root)).lookup(stage, key)
    assert entry is not None
    barrier.wait()  # type: ignore[attr-defined]
    try:
        results.put(Remote(url).push(entry))  # type: ignore[attr-defined]
    except BaseException as exc:  # reported to the test, which fails on it
        results.put(f"{type(exc).__name__}: {exc}")  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", ["dir", "s3"])
def test_two_processes_push_the_same_key_at_once(kind: str, tmp_path: Path,
                                                 request: pytest.FixtureRequest) -> None:
    if kind == "dir":
        (tmp_path / "remote").mkdir()
        url = str(tmp_path / "remote")
    else:
        url = f"{request.getfixturevalue('s3').bucket_url}/{uuid.uuid4().hex}"
    entry = make_entry(tmp_path / "a")
    context = multiprocessing.get_context("spawn")  # no fork of moto's or s3fs's threads
    barrier, results = context.Barrier(2), context.Queue()
    pushers = [context.Process(target=_push_in_child,
                               args=(url, str(tmp_path / "a"), entry.stage, entry.key,
                                     barrier, results)) for _ in range(2)]
    for pusher in pushers:
        pusher.start()
    outcomes = [results.get(timeout=120) for _ in pushers]
    for pusher in pushers:
        pusher.join(timeout=60)

    # both succeeded; on a directory exactly one created the meta (os.link is an atomic
    # create). moto checks S3's If-None-Match and then stores, unlocked, so there both
    # may have created it (with the same bytes); AWS S3 lets one win.
    assert all(isinstance(outcome, bool) for outcome in outcomes), outcomes
    assert sorted(outcomes) == [False, True] if kind == "dir" else True in outcomes, outcomes
    remote = Remote(url)
    assert [(e.stage, e.key, e.digest) for e in remote.entries()] == [
        (entry.stage, entry.key, entry.digest)]
    fs, root = remote_fs(remote)
    assert sorted(fs.find(f"{root}/v1/blobs")) == sorted(
        {blob(remote, sha) for sha in entry.files.values()})  # no temp file left
    fetched = remote.fetch(Cache(tmp_path / "b"), entry.stage, entry.key)
    assert fetched is not None and contents(fetched) == FILES


# --- probe and access errors ----------------------------------------------------------------


def test_probe_of_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(RemoteError, match="no such directory") as raised:
        Remote(str(tmp_path / "not-there")).probe()
    assert str(tmp_path / "not-there") in str(raised.value)
    assert "\n" not in str(raised.value)


def test_probe_of_an_unreachable_endpoint_is_an_error(s3: S3Server) -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    configure({**s3.env(), "FSSPEC_S3_ENDPOINT_URL": f"http://127.0.0.1:{port}"})
    url = f"{s3.bucket_url}/x"

    with pytest.raises(RemoteError) as raised:
        Remote(url).probe()

    message = str(raised.value)
    assert message.startswith(f"remote cache {url}: unreachable")
    assert "FSSPEC_S3_ENDPOINT_URL" in message and "\n" not in message


@pytest.mark.parametrize("which", ["unknown key", "wrong secret", "no credentials"])
def test_wrong_credentials_are_an_error(which: str, s3: S3Server, tmp_path: Path) -> None:
    env = s3.env({"unknown key": Keys("AKIAUNKNOWN000000000", "secret"),
                  "wrong secret": Keys(s3.rw.key, "not-the-secret"),
                  "no credentials": s3.rw}[which])
    if which == "no credentials":
        del env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"]
    configure(env)

    remote = Remote(f"{s3.bucket_url}/x")

    with pytest.raises(RemoteError) as raised:
        remote.probe()

    assert "credentials" in str(raised.value) and raised.value.denied
    assert str(raised.value).startswith(f"remote cache {s3.bucket_url}/x: access denied")
    for use in (remote.entries, lambda: remote.fetch(Cache(tmp_path / "b"), STAGE, "e" * 64),
                lambda: remote.push(make_entry(tmp_path / "a"))):
        with pytest.raises(RemoteError, match="access denied"):  # never a plain miss
            use()


def test_probe_of_a_missing_bucket_is_an_error(s3: S3Server) -> None:
    with pytest.raises(RemoteError, match="no such bucket"):
        Remote("s3://no-such-bucket/x").probe()


def test_a_read_only_remote_restores_but_refuses_pushes(s3: S3Server, tmp_path: Path) -> None:
    url = f"{s3.bucket_url}/{uuid.uuid4().hex}"
    pushed = make_entry(tmp_path / "a")
    assert Remote(url).push(pushed) is True
    configure(s3.env(s3.ro))
    remote = Remote(url)

    assert remote.probe() is False
    fetched = remote.fetch(Cache(tmp_path / "b"), pushed.stage, pushed.key)
    assert fetched is not None and contents(fetched) == FILES
    assert remote.push(pushed) is False  # already there: no write needed
    with pytest.raises(RemoteError, match="access denied") as raised:
        remote.push(make_entry(tmp_path / "a", bits=4))
    assert raised.value.denied
    assert [e.key for e in remote.entries()] == [pushed.key]


def test_fsspec_configuration_overrides_the_fail_fast_defaults(s3: S3Server) -> None:
    from edgebuild.build import remote as remotes

    configure({**s3.env(), "FSSPEC_S3": json.dumps({"config_kwargs": {"read_timeout": 33},
                                                     "max_concurrency": 4})})
    options = remotes._options(f"{s3.bucket_url}/x")
    assert options == {"max_concurrency": 4, "config_kwargs": {**remotes.S3_CONFIG,
                                                               "read_timeout": 33}}
    assert remotes._options("memory://x") == {}


def test_a_fresh_process_finds_the_s3_remote_from_the_environment_alone(
        s3: S3Server, tmp_path: Path) -> None:
    """What an `edgebuild` subprocess gets: s3server's variables, no code configuration."""
    url = f"{s3.bucket_url}/{uuid.uuid4().hex}"
    entry = make_entry(tmp_path / "a")
    Remote(url).push(entry)
    script = ("import sys; from pathlib import Path; from edgebuild.build.cache import Cache;"
              "from edgebuild.build.remote import Remote; r = Remote(sys.argv[1]);"
              "e = r.fetch(Cache(Path(sys.argv[2])), sys.argv[3], sys.argv[4]);"
              "print(r.probe(), e.digest)")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FSSPEC_", "AWS_"))}

    result = subprocess.run([sys.executable, "-c", script, url, str(tmp_path / "b"),
                             entry.stage, entry.key], env={**env, **s3.env()},
                            capture_output=True, text=True, timeout=120, cwd=REPO)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", entry.digest]


def test_importing_the_module_does_not_import_fsspec() -> None:
    result = subprocess.run(
        [sys.executable, "-c", "import sys, edgebuild.build.remote; "
         "print(sorted(m for m in sys.modules if m.split('.')[0] in "
         "('fsspec', 's3fs', 'botocore', 'aiohttp')))"],
        capture_output=True, text=True, timeout=60, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
