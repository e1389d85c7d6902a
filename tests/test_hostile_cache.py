"""The cache and the remote as a trust boundary, and JSON records as hostile input.

Every case is made here, from a real build of a one-layer project: a remote entry
rewritten so that everything in it is consistent but its bytes are the attacker's; JSON
records nested 100,000 deep or tens of megabytes large where the build, `status` and
`cache verify` read them. Each runs under tests/hostile.py's bounds (time, peak memory).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import NPZ_MANIFEST, npz_data, run_cli, write
from hostile import assert_user_error, run_bounded

from edgebuild.build.cache import canonical, digest_of

pytestmark = pytest.mark.slow

PLANTED = b"\nvoid planted(void) { /* not edgebuild's */ }\n"
DEEP = "[" * 100_000 + "]" * 100_000
SECONDS, MIB = 60, 1024


@pytest.fixture(scope="module")
def origin(tmp_path_factory) -> Path:
    """A project as committed (manifest, data, edgebuild.lock), its results pushed to a
    remote directory (`origin/../remote`) by a build that had the right to."""
    root = tmp_path_factory.mktemp("hostile") / "origin"
    root.mkdir()
    (root.parent / "remote").mkdir()
    npz_data(root / "data.npz")
    write(root / "edgebuild.yaml", NPZ_MANIFEST)
    result = run_cli(["build", "--remote", str(root.parent / "remote"), "--push"], root,
                     {"EDGEBUILD_REMOTE_KEY": "team-secret"})
    assert result.returncode == 0, result.stderr
    return root


def clone(origin: Path, where: Path, lock: bool = True) -> Path:
    """A fresh clone: manifest, data (and the lock), no build tree, no cache; plus a copy
    of the remote for this test to tamper with (`where/remote`)."""
    (where / "p").mkdir(parents=True)
    for name in ("edgebuild.yaml", "data.npz") + (("edgebuild.lock",) if lock else ()):
        shutil.copy(origin / name, where / "p" / name)
    shutil.copytree(origin.parent / "remote", where / "remote")
    return where / "p"


def locked_key(origin: Path, stage: str) -> str:
    return json.loads((origin / "edgebuild.lock").read_text())["manifests"]["tiny"][stage]["key"]


def plant(remote: Path, stage: str, key: str, change: Callable[[dict[str, bytes]], None],
          signature: str | None = None) -> None:
    """Rewrite the remote's entry for `key` as an attacker with write access would: other
    file bytes, their blobs, sizes, digest all consistent; the key material untouched (it
    must hash to the key); the signature kept (invalid now), replaced, or dropped."""
    meta_path = remote / "v1" / "entries" / stage / key[:2] / f"{key}.json"
    meta = json.loads(meta_path.read_bytes())
    files = {rel: (remote / "v1" / "blobs" / sha[:2] / sha).read_bytes()
             for rel, sha in meta["files"].items()}
    change(files)
    shas = {rel: hashlib.sha256(data).hexdigest() for rel, data in files.items()}
    for rel, sha in shas.items():
        blob = remote / "v1" / "blobs" / sha[:2] / sha
        blob.parent.mkdir(parents=True, exist_ok=True)
        blob.write_bytes(files[rel])
    meta.update(files=shas, sizes={rel: len(d) for rel, d in files.items()},
                digest=digest_of(shas))
    if signature is None:
        meta.pop("signature", None)
    elif signature != "keep":
        meta["signature"] = signature
    meta_path.write_bytes(canonical(meta))


def add_line(files: dict[str, bytes]) -> None:
    files["main.c"] += PLANTED


def planted_anywhere(project: Path) -> list[str]:
    """Files of the build tree, the local cache and the lock holding the planted line."""
    found = [str(p) for folder in ("build", "cache") if (project / folder).is_dir()
             for p in (project / folder).rglob("*.c") if PLANTED in p.read_bytes()]
    lock = project / "edgebuild.lock"
    return found + ([str(lock)] if lock.is_file() and b"planted" in lock.read_bytes() else [])


# -- a planted entry -------------------------------------------------------------------------

def test_a_planted_entry_never_reaches_build_the_cache_or_the_lock(origin, tmp_path):
    project = clone(origin, tmp_path)
    remote = tmp_path / "remote"
    plant(remote, "codegen", locked_key(origin, "codegen"), add_line)
    lock_before = (project / "edgebuild.lock").read_bytes()
    for case, args in (("planted, locked", ["build"]), ("planted, --locked", ["build", "--locked"]),
                       ("planted, --relock", ["build", "--relock"])):
        shutil.rmtree(project / "build", ignore_errors=True)
        shutil.rmtree(project / "cache", ignore_errors=True)
        outcome = run_bounded(case, [*args, "--remote", str(remote)], project,
                              seconds=SECONDS, mib=MIB)
        assert outcome.code == 0, outcome.stderr[-3000:]
        assert planted_anywhere(project) == [], case
        assert (project / "build" / "tiny" / "codegen" / "main.c").read_bytes() == \
            (origin / "build" / "tiny" / "codegen" / "main.c").read_bytes()
        assert (project / "edgebuild.lock").read_bytes() == lock_before, case
        warned = [line for line in outcome.lines() if "codegen entry" in line]
        assert len(warned) == (0 if "relock" in case else 1), (case, warned)  # --relock: no pulls
    verify = run_cli(["cache", "verify"], project)
    assert verify.returncode == 0 and ", 0 corrupt" in verify.stderr, verify.stderr


def test_the_lock_refuses_a_planted_entry_before_it_is_fetched(origin, tmp_path):
    project = clone(origin, tmp_path)
    plant(tmp_path / "remote", "codegen", locked_key(origin, "codegen"), add_line)
    outcome = run_bounded("planted, lock names it", ["build", "--remote",
                          str(tmp_path / "remote")], project, seconds=SECONDS, mib=MIB)
    assert outcome.code == 0
    (line,) = [line for line in outcome.lines() if "codegen entry" in line]
    assert "edgebuild.lock records" in line and "not used, the stage is built instead" in line


@pytest.mark.parametrize("signature", ["keep", None, "0" * 64])
def test_with_a_signing_key_an_unsigned_or_forged_entry_is_not_used(origin, tmp_path,
                                                                    signature):
    """No lock at all (a new manifest, a branch): the signature alone keeps the planted
    bytes out. The attacker kept the old signature, dropped it, or forged one."""
    project = clone(origin, tmp_path, lock=False)
    plant(tmp_path / "remote", "codegen", locked_key(origin, "codegen"), add_line, signature)
    outcome = run_bounded(f"planted, signature {signature or 'dropped'}",
                          ["build", "--remote", str(tmp_path / "remote")], project,
                          seconds=SECONDS, mib=MIB, env={"EDGEBUILD_REMOTE_KEY": "team-secret"})
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert planted_anywhere(project) == []
    (line,) = [line for line in outcome.lines() if "codegen entry" in line]
    assert ("not signed" in line) if signature is None else ("signature does not match" in line)


def test_signed_entries_are_used_with_the_key(origin, tmp_path):
    project = clone(origin, tmp_path, lock=False)
    result = run_cli(["build", "--json", "--remote", str(tmp_path / "remote")], project,
                     {"EDGEBUILD_REMOTE_KEY": "team-secret"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["tally"] == {"restored-remote": 11}


def test_cache_verify_removes_an_entry_that_contradicts_the_lock(origin, tmp_path):
    """An entry adopted before this check existed (or written into a shared cache
    directory): `cache verify` names it, `--delete` removes it, the build then rebuilds."""
    project = clone(origin, tmp_path)
    assert run_cli(["build", "--until", "codegen"], project).returncode == 0
    entry = next((project / "cache" / "codegen").glob("*/*"))
    meta = json.loads((entry / "meta.json").read_text())
    main = entry / "out" / "main.c"
    main.chmod(0o644)
    main.write_bytes(main.read_bytes() + PLANTED)
    meta["files"]["main.c"] = hashlib.sha256(main.read_bytes()).hexdigest()
    meta["digest"] = digest_of(meta["files"])
    (entry / "meta.json").write_text(json.dumps(meta))
    outcome = run_bounded("cache verify, entry against the lock", ["cache", "verify"], project)
    assert outcome.code == 1 and "contradicts edgebuild.lock" in outcome.stderr, outcome.stderr
    deleted = run_bounded("cache verify --delete", ["cache", "verify", "--delete"], project)
    assert deleted.code == 0 and "1 deleted" in deleted.stderr
    shutil.rmtree(project / "build")
    assert run_cli(["build"], project).returncode == 0
    assert planted_anywhere(project) == []


# -- hostile JSON records --------------------------------------------------------------------

def _record(project: Path, where: str) -> Path:
    if where == "lock":
        return project / "edgebuild.lock"
    if where == "state":
        return project / "build" / "tiny" / ".state" / "train.json"
    if where == "index":
        return next((project / "build" / ".edgebuild").glob("index-*.json"))  # one per environment
    return next((project / "cache" / "train").glob("*/*/meta.json"))  # "meta"


@pytest.mark.parametrize("where", ["meta", "state", "index"])
@pytest.mark.parametrize("content", ["deep", "huge"])
def test_a_hostile_local_record_is_a_corrupt_entry_never_an_internal_error(origin, tmp_path,
                                                                          where, content):
    project = clone(origin, tmp_path)
    assert run_cli(["build", "--until", "qat"], project).returncode == 0
    record = _record(project, where)
    record.chmod(0o644)
    record.write_text(DEEP if content == "deep" else '["' + "x" * (70 << 20) + '"]')
    for command in (["build", "--until", "qat"], ["status"], ["cache", "verify"],
                    ["cache", "verify", "--delete"], ["cache", "gc"], ["build", "--until", "qat"]):
        outcome = run_bounded(f"{content} {where}: {' '.join(command)}", command, project,
                              seconds=SECONDS, mib=MIB)
        assert "Traceback" not in outcome.stderr and "internal error" not in outcome.stderr, \
            outcome.stderr[-2000:]
        assert outcome.code in (0, 1), (command, outcome.code, outcome.stderr[-2000:])
        if command == ["cache", "verify"] and where == "meta":
            assert outcome.code == 1 and "meta.json unreadable" in outcome.stderr


@pytest.mark.parametrize("content", ["deep", "huge"])
def test_a_hostile_lock_file_is_one_user_error(origin, tmp_path, content):
    project = clone(origin, tmp_path)
    _record(project, "lock").write_text(DEEP if content == "deep"
                                        else '["' + "x" * (70 << 20) + '"]')
    for command in (["build"], ["cache", "verify"]):  # `status` does not read the lock
        outcome = run_bounded(f"{content} edgebuild.lock: {' '.join(command)}", command,
                              project, seconds=SECONDS, mib=MIB)
        limit = "nested deeper than 64 levels" if content == "deep" else "larger than"
        assert_user_error(outcome, "edgebuild.lock", limit)


@pytest.mark.parametrize("content", ["deep", "huge"])
def test_a_hostile_remote_meta_is_one_warning_then_a_build(origin, tmp_path, content):
    project = clone(origin, tmp_path)
    key = locked_key(origin, "train")
    meta = tmp_path / "remote" / "v1" / "entries" / "train" / key[:2] / f"{key}.json"
    meta.write_text(DEEP if content == "deep" else '["' + "x" * (40 << 20) + '"]')
    outcome = run_bounded(f"{content} remote meta", ["build", "--until", "train", "--remote",
                          str(tmp_path / "remote")], project, seconds=SECONDS, mib=MIB)
    assert outcome.code == 0, outcome.stderr[-3000:]
    (line,) = [line for line in outcome.lines() if "train entry" in line]
    assert "not JSON within the limits" in line


def test_a_remote_blob_longer_than_its_meta_says_is_not_read_whole(origin, tmp_path):
    project = clone(origin, tmp_path)
    key = locked_key(origin, "train")
    meta = json.loads((tmp_path / "remote" / "v1" / "entries" / "train" / key[:2] /
                       f"{key}.json").read_text())
    sha = meta["files"]["float.npz"]
    blob = tmp_path / "remote" / "v1" / "blobs" / sha[:2] / sha
    with open(blob, "ab") as handle:  # 1.5 GiB more than the meta's size (sparse): read
        handle.truncate(blob.stat().st_size + (1536 << 20))  # whole, it breaks the bound
    outcome = run_bounded("remote blob 1.5 GiB too long", ["build", "--until", "train",
                          "--remote", str(tmp_path / "remote")], project, seconds=SECONDS,
                          mib=MIB)
    assert outcome.code == 0, outcome.stderr[-3000:]
    assert any("truncated?" in line or "bytes, its meta says" in line for line in outcome.lines())


# -- small items -----------------------------------------------------------------------------

def test_a_settings_file_that_is_not_utf8_is_one_user_error(origin, tmp_path):
    project = clone(origin, tmp_path)
    (project / "edgebuild.toml").write_bytes(b"[cache]\nremote = \"caf\xe9\"\n")
    assert_user_error(run_bounded("edgebuild.toml not UTF-8", ["build"], project),
                      "edgebuild.toml: not UTF-8")


def test_a_lock_whose_digest_was_edited_says_so(origin, tmp_path):
    """The lock's file list and digest disagree: the message said `qat ()`."""
    project = clone(origin, tmp_path)
    lock = json.loads((project / "edgebuild.lock").read_text())
    lock["manifests"]["tiny"]["qat"]["digest"] = "0" * 64
    (project / "edgebuild.lock").write_text(json.dumps(lock))
    result = run_cli(["build", "--until", "qat"], project)
    assert result.returncode == 1
    assert "()" not in result.stderr and "inconsistent, was it edited" in result.stderr


# -- other JSON readers ------------------------------------------------------------------------

def test_compare_ai8x_stops_reading_a_gzip_bomb(tmp_path):
    """A canonical program as .json.gz decompressing to 300 MiB is refused after reading
    64 MiB of it (it was decompressed whole), and a deep one by the depth limit."""
    import gzip

    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as handle:
        for _ in range(300):
            handle.write(b" " * (1 << 20))
    deep = tmp_path / "deep.json"
    deep.write_text(DEEP)
    for name, needle in (("bomb.json.gz", "larger than"), ("deep.json", "nested deeper")):
        outcome = run_bounded(f"compare-ai8x {name}", ["compare-ai8x", name, name], tmp_path,
                              seconds=SECONDS, mib=MIB)
        assert_user_error(outcome, name, needle)


def test_an_npz_zip_bomb_is_refused_before_it_is_unpacked(tmp_path):
    """data.npz whose `x` unpacks to 5 GiB of zeros (about 5 MB on disk): `check` reads it
    and was killed unpacking it; now one line with the size, in bounded memory."""
    import io
    import zipfile

    import numpy as np

    header = io_header(np.dtype(np.float32), (5 * 1024**3 // 4,))
    with zipfile.ZipFile(tmp_path / "data.npz", "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open("x.npy", "w", force_zip64=True) as member:
            member.write(header)
            zeros = bytes(1 << 24)
            for _ in range(5 * 64):
                member.write(zeros)
        labels = io.BytesIO()
        np.save(labels, np.arange(60) % 3)
        archive.writestr("y.npy", labels.getvalue())
    write(tmp_path / "edgebuild.yaml", NPZ_MANIFEST)
    outcome = run_bounded("npz zip bomb (5 GiB)", ["check"], tmp_path, seconds=SECONDS, mib=MIB)
    assert_user_error(outcome, "data.npz", "unpacks to 5368709", "4294967296")


def io_header(dtype, shape) -> bytes:
    """A .npy header (magic, version 2.0, dict) for an array of `shape`; its data follows."""
    import io

    import numpy as np

    buffer = io.BytesIO()
    np.lib.format.write_array_header_2_0(buffer, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                  "fortran_order": False, "shape": shape})
    return buffer.getvalue()


def test_an_npy_header_declaring_373_gib_is_refused_before_numpy_allocates_it(tmp_path):
    """A known answer (`kat.input`) whose 100-byte .npy declares 10^11 floats: numpy
    allocated 373 GiB first (MemoryError, an internal error)."""
    import numpy as np

    (tmp_path / "liar.npy").write_bytes(io_header(np.dtype(np.float32), (10**11,)) + bytes(64))
    from edgebuild.core import arrays

    with pytest.raises(ValueError, match="its header declares an array of 400000000000 bytes"):
        arrays.read(tmp_path / "liar.npy")
    (tmp_path / "short.npy").write_bytes(io_header(np.dtype(np.float32), (1000,)) + bytes(64))
    with pytest.raises(ValueError, match="declares 4000 bytes of data"):
        arrays.read(tmp_path / "short.npy")


@pytest.mark.parametrize("case", ["deep", "huge"])
def test_a_hostile_settings_file_is_one_user_error(origin, tmp_path, case):
    project = clone(origin, tmp_path)
    text = "x = " + "[" * 30_000 + "]" * 30_000 if case == "deep" else \
        "[cache]\nremote = '" + "s" * (10 << 20) + "'\n"
    (project / "edgebuild.toml").write_text(text)
    outcome = run_bounded(f"edgebuild.toml {case}", ["build", "--until", "data"], project)
    assert_user_error(outcome, "edgebuild.toml",
                      "nested too deeply" if case == "deep" else "larger than 65536 bytes")
