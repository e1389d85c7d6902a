"""Unit tests of the content-hash cache (docs/internals/cache.md), using
edgebuild.build.cache directly."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from edgebuild.build import cache as caches
from edgebuild.build.cache import Cache

REPO = Path(__file__).resolve().parent.parent

MATERIAL = {"stage": "data", "code": "0" * 64,
            "config": {"seed": 1, "dataset": {"format": "npz", "split": {"val": 0.1, "test": 0.2}}},
            "upstream": {"validate": "ab" * 32}, "tools": {"numpy": "2.0.0"}}


def _reordered(obj):
    """The same JSON value with every dict's insertion order reversed."""
    if isinstance(obj, dict):
        return {k: _reordered(obj[k]) for k in reversed(list(obj))}
    if isinstance(obj, list):
        return [_reordered(v) for v in obj]
    return obj


def _writer(files: dict[str, bytes], calls: list | None = None):
    def build(out: Path) -> None:
        if calls is not None:
            calls.append(out)
        for name, body in files.items():
            (out / name).parent.mkdir(parents=True, exist_ok=True)
            (out / name).write_bytes(body)
    return build


def _age(entry: caches.Entry, seconds_ago: float) -> None:
    """Pretend the entry was last used `seconds_ago`."""
    moment = time.time() - seconds_ago
    for name in ("used", "meta.json"):
        if (entry.path / name).exists():
            os.utime(entry.path / name, (moment, moment))


# --- key_of -----------------------------------------------------------------------------


def test_key_of_is_stable_and_hex_sha256():
    key = caches.key_of(MATERIAL)
    assert key == caches.key_of(json.loads(json.dumps(MATERIAL)))
    assert len(key) == 64 and int(key, 16) >= 0


def test_key_of_ignores_dict_order():
    reordered = _reordered(MATERIAL)
    assert list(reordered) != list(MATERIAL)
    assert list(reordered["config"]) != list(MATERIAL["config"])
    assert caches.key_of(reordered) == caches.key_of(MATERIAL)


@pytest.mark.parametrize("change", [
    lambda m: m["config"].update(seed=2),
    lambda m: m["config"]["dataset"]["split"].update(val=0.15),
    lambda m: m.update(code="1" * 64),
    lambda m: m.update(stage="train"),
    lambda m: m["upstream"].update(validate="cd" * 32),
    lambda m: m["tools"].update(numpy="2.0.1"),
    lambda m: m["config"].update(extra=None),
    lambda m: m["config"]["dataset"].pop("format"),
])
def test_key_of_changes_with_any_material_change(change):
    changed = json.loads(json.dumps(MATERIAL))
    change(changed)
    assert caches.key_of(changed) != caches.key_of(MATERIAL)


def test_key_of_distinguishes_types():
    assert caches.key_of({"config": {"seed": 1}}) != caches.key_of({"config": {"seed": "1"}})
    assert caches.key_of({"config": {"x": 1}}) != caches.key_of({"config": {"x": 1.5}})


# --- publish ------------------------------------------------------------------------------


def test_publish_builds_once(tmp_path):
    cache = Cache(tmp_path / "cache")
    key = caches.key_of(MATERIAL)
    calls: list = []
    entry, built = cache.publish("data", key, MATERIAL, _writer({"a.txt": b"A", "sub/b.bin": b"B"}, calls))
    assert built is True and len(calls) == 1
    assert entry.path == cache.entry_path("data", key) == tmp_path / "cache" / "data" / key[:2] / key
    assert (entry.out / "a.txt").read_bytes() == b"A"
    assert (entry.out / "sub" / "b.bin").read_bytes() == b"B"
    assert set(entry.files) == {"a.txt", "sub/b.bin"}
    assert entry.digest == caches.digest_of(entry.files)
    assert entry.material == MATERIAL

    again, built = cache.publish("data", key, MATERIAL, _writer({"a.txt": b"other"}, calls))
    assert built is False and len(calls) == 1
    assert again.digest == entry.digest
    assert (again.out / "a.txt").read_bytes() == b"A"
    assert [e.key for e in cache.entries()] == [key]


def test_meta_json_records_full_key_material(tmp_path):
    cache = Cache(tmp_path / "cache")
    key = caches.key_of(MATERIAL)
    entry, _ = cache.publish("data", key, MATERIAL, _writer({"a.txt": b"A"}))
    meta = json.loads((entry.path / "meta.json").read_text())
    assert meta["material"] == MATERIAL
    assert meta["key"] == key and meta["stage"] == "data"
    assert meta["files"] == {"a.txt": caches.sha256_file(entry.out / "a.txt")}


def test_entry_files_are_read_only(tmp_path):
    cache = Cache(tmp_path / "cache")
    entry, _ = cache.publish("data", "f" * 64, MATERIAL, _writer({"a.txt": b"A", "d/b.txt": b"B"}))
    for name in ("a.txt", "d/b.txt"):
        mode = (entry.out / name).stat().st_mode
        assert mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) == 0, oct(mode)


def test_entry_is_invisible_while_building(tmp_path):
    cache = Cache(tmp_path / "cache")
    key = "1" * 64
    seen = {}

    def build(out: Path) -> None:
        (out / "x").write_text("x")
        seen["entry"] = cache.entry_path("data", key).exists()
        seen["lookup"] = cache.lookup("data", key)
        seen["out_under_tmp"] = (tmp_path / "cache" / "tmp") in out.parents

    cache.publish("data", key, MATERIAL, build)
    assert seen == {"entry": False, "lookup": None, "out_under_tmp": True}
    assert cache.lookup("data", key) is not None


def test_failed_build_leaves_no_entry_and_no_temp_dir(tmp_path):
    cache = Cache(tmp_path / "cache")
    key = "2" * 64

    def build(out: Path) -> None:
        (out / "half.bin").write_bytes(b"partial")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        cache.publish("data", key, MATERIAL, build)
    assert cache.lookup("data", key) is None
    assert not cache.entry_path("data", key).exists()
    assert cache.entries() == []
    assert list((tmp_path / "cache" / "tmp").iterdir()) == []
    # the key is still buildable afterwards (the lock was released)
    entry, built = cache.publish("data", key, MATERIAL, _writer({"ok": b"1"}))
    assert built and (entry.out / "ok").read_bytes() == b"1"


def test_entry_without_meta_json_is_not_an_entry(tmp_path):
    """A directory killed before meta.json was written must never look complete."""
    cache = Cache(tmp_path / "cache")
    key = "3" * 64
    partial = cache.entry_path("data", key) / "out"
    partial.mkdir(parents=True)
    (partial / "data.npz").write_bytes(b"half")
    assert cache.lookup("data", key) is None
    assert cache.entries() == []
    calls: list = []
    entry, built = cache.publish("data", key, MATERIAL, _writer({"data.npz": b"full"}, calls))
    assert built and len(calls) == 1
    assert (entry.out / "data.npz").read_bytes() == b"full"


@pytest.mark.parametrize("meta", ["{}", "", '{"digest": "x"', "[]", "null",
                                  '{"digest": 1, "files": {}, "material": {}}'])
def test_malformed_metadata_is_no_entry_and_verify_counts_it(tmp_path, meta):
    cache = Cache(tmp_path / "cache")
    good, _ = cache.publish("data", "5" * 64, MATERIAL, _writer({"a": b"1"}))
    bad = cache.entry_path("qat", "6" * 64)
    (bad / "out").mkdir(parents=True)
    (bad / "meta.json").write_text(meta)
    assert cache.lookup("qat", "6" * 64) is None
    assert [e.key for e in cache.entries()] == [good.key]
    report = {key: why for _, key, _, why in caches.verify(cache)}
    assert report[good.key] == [] and report["6" * 64] != []
    # a build of that key replaces it
    entry, built = cache.publish("qat", "6" * 64, MATERIAL, _writer({"b": b"2"}))
    assert built and caches.problems(entry) == []


def test_metadata_whose_digest_does_not_match_its_files_is_no_entry(tmp_path):
    cache = Cache(tmp_path / "cache")
    entry, _ = cache.publish("data", "7" * 64, MATERIAL, _writer({"a": b"1"}))
    meta = json.loads((entry.path / "meta.json").read_text())
    meta["digest"] = "0" * 64
    (entry.path / "meta.json").write_text(json.dumps(meta))
    assert cache.lookup("data", "7" * 64) is None


# --- problems -----------------------------------------------------------------------------


@pytest.fixture
def entry(tmp_path) -> caches.Entry:
    cache = Cache(tmp_path / "cache")
    made, _ = cache.publish("data", "4" * 64, MATERIAL,
                            _writer({"a.txt": b"alpha", "b.txt": b"beta"}))
    assert caches.problems(made) == []
    return made


def test_problems_detects_modified_file(entry):
    target = entry.out / "a.txt"
    target.chmod(0o644)
    target.write_bytes(b"ALPHA")  # same size, different content
    assert caches.problems(entry) == ["a.txt: content changed"]


def test_problems_detects_missing_file(entry):
    (entry.out / "b.txt").unlink()
    assert caches.problems(entry) == ["b.txt: missing"]


def test_problems_detects_extra_file(entry):
    (entry.out / "c.txt").write_text("intruder")
    assert caches.problems(entry) == ["c.txt: unexpected file"]


def test_problems_detects_missing_artifact_dir(entry):
    caches.remove_tree(entry.out)
    assert caches.problems(entry) == ["artifact directory is missing"]


def test_publish_replaces_a_corrupt_entry(tmp_path, entry):
    cache = Cache(tmp_path / "cache")
    (entry.out / "a.txt").chmod(0o644)
    (entry.out / "a.txt").write_bytes(b"corrupt")
    calls: list = []
    fresh, built = cache.publish("data", entry.key, MATERIAL,
                                 _writer({"a.txt": b"alpha", "b.txt": b"beta"}, calls))
    assert built and len(calls) == 1
    assert caches.problems(fresh) == []
    assert (fresh.out / "a.txt").read_bytes() == b"alpha"


# --- gc -----------------------------------------------------------------------------------


def _three_entries(cache: Cache) -> list[caches.Entry]:
    """Three entries of 1000 bytes of artifact each, used 3, 2 and 1 days ago."""
    made = []
    for i, days in enumerate((3, 2, 1)):
        entry, _ = cache.publish("data", f"{i}" * 64, MATERIAL, _writer({"blob": bytes(1000)}))
        caches.touch(entry)
        _age(entry, days * 86400)
        made.append(entry)
    return made


def test_gc_never_removes_kept_keys(tmp_path):
    cache = Cache(tmp_path / "cache")
    old, mid, new = _three_entries(cache)
    removed = caches.collect(cache, keep={old.key, new.key}, max_bytes=0, max_age_s=0)
    assert [e.key for e in removed] == [mid.key]
    assert {e.key for e in cache.entries()} == {old.key, new.key}
    assert all(caches.problems(e) == [] for e in cache.entries())


def test_gc_by_age(tmp_path):
    cache = Cache(tmp_path / "cache")
    old, mid, new = _three_entries(cache)
    removed = caches.collect(cache, keep=set(), max_bytes=None, max_age_s=1.5 * 86400)
    assert {e.key for e in removed} == {old.key, mid.key}
    assert [e.key for e in cache.entries()] == [new.key]
    assert not old.path.exists() and not mid.path.exists()


def test_gc_by_age_uses_last_use_not_creation(tmp_path):
    cache = Cache(tmp_path / "cache")
    old, mid, new = _three_entries(cache)
    caches.touch(old)  # used just now
    removed = caches.collect(cache, keep=set(), max_bytes=None, max_age_s=1.5 * 86400)
    assert {e.key for e in removed} == {mid.key}
    assert {e.key for e in cache.entries()} == {old.key, new.key}


def test_gc_by_size_removes_least_recently_used_first(tmp_path):
    cache = Cache(tmp_path / "cache")
    old, mid, new = _three_entries(cache)
    budget = caches.entry_bytes(new) + caches.entry_bytes(mid)
    removed = caches.collect(cache, keep=set(), max_bytes=budget, max_age_s=None)
    assert [e.key for e in removed] == [old.key]
    assert {e.key for e in cache.entries()} == {mid.key, new.key}

    removed = caches.collect(cache, keep=set(), max_bytes=caches.entry_bytes(new), max_age_s=None)
    assert [e.key for e in removed] == [mid.key]
    assert [e.key for e in cache.entries()] == [new.key]


def test_gc_without_limits_removes_nothing(tmp_path):
    cache = Cache(tmp_path / "cache")
    made = _three_entries(cache)
    assert caches.collect(cache, keep=set(), max_bytes=None, max_age_s=None) == []
    assert len(cache.entries()) == len(made)


def test_sweep_temp_removes_temp_dirs_no_live_build_owns(tmp_path):
    cache = Cache(tmp_path / "cache")
    dead, live = cache.root / "tmp" / f"data-{'a' * 64}-1234", cache.root / "tmp" / f"qat-{'b' * 64}-5678"
    for temp in (dead, live):
        (temp / "out").mkdir(parents=True)
        (temp / "out" / "half.bin").write_bytes(b"x")
        (temp / "out" / "half.bin").chmod(0o444)
    old_stray, fresh_stray = cache.root / "tmp" / ".probe-old", cache.root / "tmp" / ".probe-new"
    old_stray.write_bytes(b"")
    fresh_stray.write_bytes(b"")
    moment = time.time() - 7200
    os.utime(old_stray, (moment, moment))
    with cache.lock("qat", "b" * 64):  # a live build of that key (the dead one's is free)
        assert caches.sweep_temp(cache, older_than_s=3600) == 2
    assert not dead.exists() and not old_stray.exists()
    assert live.is_dir() and fresh_stray.exists()
    assert caches.sweep_temp(cache, older_than_s=3600) == 1  # its owner is gone now
    assert not live.exists()


def test_a_killed_publication_leaves_a_temp_dir_gc_can_remove(tmp_path):
    cache = Cache(tmp_path / "cache")
    key = "c" * 64
    script = (f"import os, sys\nsys.path.insert(0, {str(REPO)!r})\n"
              "from pathlib import Path\nfrom edgebuild.build.cache import Cache\n"
              f"c = Cache(Path({str(cache.root)!r}))\n"
              f"c.publish('data', {key!r}, {{}}, lambda out: os._exit(9))\n")
    assert subprocess.run([sys.executable, "-c", script], timeout=60).returncode == 9
    (left,) = list((cache.root / "tmp").iterdir())
    assert left.name.startswith(f"data-{key}-")
    assert caches.sweep_temp(cache) == 1
    assert list((cache.root / "tmp").iterdir()) == []


# --- file_digest --------------------------------------------------------------------------


def test_file_digest_is_the_content_hash(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"hello world")
    root = tmp_path / "cache"
    assert caches.file_digest(data, root) == caches.sha256_file(data)
    assert len(list((root / "stat").glob("*.json"))) == 1


def test_file_digest_uses_the_stat_record(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"hello world")
    root = tmp_path / "cache"
    real = caches.file_digest(data, root)
    (record,) = (root / "stat").glob("*.json")
    saved = json.loads(record.read_text())
    saved["value"] = "0" * 64  # a remembered digest is trusted while the stat is unchanged
    record.write_text(json.dumps(saved))
    caches._REMEMBERED.clear()  # a new process: only the record on disk remembers
    assert caches.file_digest(data, root) == "0" * 64
    os.utime(data)  # a touch invalidates the record, and the content decides again
    assert caches.file_digest(data, root) == real


def test_file_digest_notices_same_size_content_change(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"aaaaaaaa")
    root = tmp_path / "cache"
    before = caches.file_digest(data, root)
    data.write_bytes(b"bbbbbbbb")
    after = caches.file_digest(data, root)
    assert after != before
    assert after == caches.sha256_file(data)


def test_file_digest_notices_replaced_file_with_old_mtime(tmp_path):
    """Same size, same mtime, new inode (an editor's save-by-rename): still noticed."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"aaaaaaaa")
    root = tmp_path / "cache"
    before = caches.file_digest(data, root)
    old = data.stat()
    replacement = tmp_path / "data.bin.new"
    replacement.write_bytes(b"bbbbbbbb")
    os.replace(replacement, data)
    os.utime(data, ns=(old.st_atime_ns, old.st_mtime_ns))
    assert data.stat().st_mtime_ns == old.st_mtime_ns and data.stat().st_size == old.st_size
    assert caches.file_digest(data, root) == caches.sha256_file(data) != before


def test_file_digest_ignores_mtime_when_content_is_unchanged(tmp_path):
    data = tmp_path / "data.bin"
    data.write_bytes(b"same")
    root = tmp_path / "cache"
    before = caches.file_digest(data, root)
    moment = time.time() + 100
    os.utime(data, (moment, moment))
    assert caches.file_digest(data, root) == before


def test_file_digest_works_with_unwritable_cache(tmp_path):
    """The stat record is an optimization: a cache that cannot be written still digests."""
    data = tmp_path / "data.bin"
    data.write_bytes(b"content")
    blocker = tmp_path / "afile"
    blocker.write_text("")
    assert caches.file_digest(data, blocker / "cache") == caches.sha256_file(data)


def test_writable_tells_a_read_only_cache(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    assert not Cache(blocker / "cache").writable
    assert Cache(tmp_path / "ok").writable
    assert list((tmp_path / "ok" / "tmp").iterdir()) == []


def test_write_atomic_leaves_no_temp_files(tmp_path):
    target = tmp_path / "deep" / "state.json"
    caches.write_atomic(target, "one")
    caches.write_atomic(target, "two")
    assert target.read_text() == "two"
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]
