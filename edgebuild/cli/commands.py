"""The CLI commands, one function each: `(args, cwd) -> exit status`."""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from edgebuild.build import project as projects
from edgebuild.build import settings
from edgebuild.build.lock import Lock
from edgebuild.build.outcome import Run
from edgebuild.build.provenance import Provenance
from edgebuild.cli import summary
from edgebuild.core.errors import EXIT_OK, EXIT_STAGE_FAILED, EXIT_USER_ERROR, UserError

if TYPE_CHECKING:
    from edgebuild.build.remote import Remote


def _err(message: str) -> None:
    print(message, file=sys.stderr)


def build(args: argparse.Namespace, cwd: Path) -> int:
    from edgebuild.build import lock as lockfile
    from edgebuild.build import runner as pipeline

    if args.jobs < 1:
        raise UserError("-j/--jobs must be at least 1")
    if args.locked and args.relock:
        raise UserError("--locked and --relock contradict each other: choose one")
    root, cache_root, files = projects.where(args.paths, cwd, args.cache_dir)
    lock_path = root / "edgebuild.lock"
    previous, record = lockfile.read_file(lock_path)
    if args.locked and not previous:
        raise UserError(f"--locked needs {lock_path}; build once without --locked "
                        "and commit the lock file")
    shared = settings.resolve(root, args.remote, args.scheduler, args.push)
    if shared.scheduler is not None and shared.remote is None:
        raise UserError(f"--scheduler {shared.scheduler}: Dask workers share their results "
                        "through the remote cache; give --remote URL too (or EDGEBUILD_REMOTE, "
                        f"or [cache] remote in {settings.FILE})")
    # the lock's digests are promises on every build; --relock rebuilds here whatever
    # contradicts them (or came from a remote) and records what it built
    if args.relock and shared.scheduler is not None:
        raise UserError("--relock builds here what the lock contradicts; a cluster builds "
                        "elsewhere: drop --scheduler (or --relock)")
    options = pipeline.Options(lock=previous, strict=args.locked, relock=args.relock,
                               provenance=record, remote=shared.remote,
                               push=shared.push or shared.scheduler is not None,
                               scheduler=shared.scheduler, verbose=args.verbose,
                               debug=args.debug)
    run = None if args.relock else pipeline.answer(root / "build", cache_root, files,
                                                   args.until, options)
    project = None
    if run is None or not (args.locked or _lock_holds(previous, record, run, root, files)):
        project = projects.load(args.paths, cwd, args.cache_dir)
        run = pipeline.run(project, args.until, args.jobs, options)
    if args.json:
        print(json.dumps(_json(run), indent=1))
    if not run.failures and project is not None and not args.locked:
        _write_lock(project, run, previous, record, files)
    sys.stderr.write(summary.table(run, root / "build"))  # last: the build's one-look answer
    if run.failures:
        return EXIT_USER_ERROR if run.user_error_only else EXIT_STAGE_FAILED
    return EXIT_OK


def _json(run: Run) -> dict[str, object]:
    """`--json`: every stage in graph order with its outcome, the tally CI asserts on
    ("built": 0), the per-manifest records and the failures."""
    stages = run.listing()
    tally: dict[str, int] = {}
    for item in stages:
        outcome = str(item["outcome"])
        tally[outcome] = tally.get(outcome, 0) + 1
    return {"stages": stages, "tally": dict(sorted(tally.items())),
            "manifests": {name: dict(sorted(records.items()))
                          for name, records in sorted(run.outcomes.items())},
            "failures": [{"task": task, "message": message, "kind": kind}
                         for task, message, kind in run.failures]}


def _write_lock(project: projects.Project, run: Run, previous: Lock,
                record: Provenance | None, files: list[Path]) -> None:
    """Record this build's keys, digests, output files and provenance in edgebuild.lock
    (written only when something in it changed: a no-op leaves the file alone)."""
    from edgebuild.build import lock as lockfile
    from edgebuild.build import provenance

    results = _results(run, project)
    merged = lockfile.merge(previous, results, _kept(project.root, files, run, previous))
    built = {m.name: project.build_dir(m.name) for m in project.manifests if m.name in results}
    paths = {m.name: {stage: list(m.files.get(stage, ())) for stage in results.get(m.name, {})}
             for m in project.manifests if m.name in results}
    base = record or provenance.empty()
    base = {"inputs": {k: v for k, v in base["inputs"].items() if k in merged},
            "environment": base["environment"]}
    summary = provenance.summarize(built, paths, project.root, base)
    if (merged, summary) != (previous, record) or not project.lock_path.is_file():
        lockfile.write(project.lock_path, merged, summary)


def _results(run: Run, project: projects.Project) -> Lock:
    """The lock entries of the stages of this run, with their output files' digests."""
    from edgebuild.build import outputs

    found: Lock = {}
    for name, stages in run.outcomes.items():
        for stage, values in stages.items():
            state = outputs.read_state(project.build_dir(name), stage)
            files = {} if state is None else {f: str(s[2])[:16] for f, s in sorted(state.files.items())}
            found.setdefault(name, {})[stage] = {"key": values["key"], "digest": values["digest"],
                                                 "outputs": files}
    return found


def _lock_holds(previous: Lock, record: Provenance | None, run: Run, root: Path,
                files: list[Path]) -> bool:
    """Would this no-op leave edgebuild.lock as it is? (Else the full path writes it.)
    Same keys mean same inputs and outputs: only missing detail or a removed manifest
    makes the lock change."""
    if record is None or not set(previous) <= _kept(root, files, run, previous):
        return False
    for name, stages in run.outcomes.items():
        if name not in record["inputs"]:
            return False
        for stage, values in stages.items():
            entry = previous.get(name, {}).get(stage)
            if entry is None or "outputs" not in entry or \
                    (entry.get("key"), entry.get("digest")) != (values["key"], values["digest"]):
                return False
    return True


def _kept(root: Path, files: list[Path], run: Run, previous: Lock) -> set[str]:
    """Lock entries a build keeps: a build of every manifest of the project drops those of
    removed manifests; a build of some (`edgebuild build one.yaml`) keeps the others."""
    every = {projects.real_path(p) for p in projects.manifest_files(root)}
    names = set(run.outcomes)
    return names if every <= set(files) else names | set(previous)


def check(args: argparse.Namespace, cwd: Path) -> int:
    project = projects.load(args.paths, cwd)
    for item in project.manifests:
        summary = item.summary
        _err(f"{item.display}: ok ({item.name}: {summary['layers']} layers, "
             f"{summary['params']} parameters, {summary['macs']} MACs)")
        for warning in summary.get("warnings", []):
            _err(warning)
    return EXIT_OK


def status(args: argparse.Namespace, cwd: Path) -> int:
    from edgebuild.build import status as statuses

    project = projects.load(args.paths, cwd, args.cache_dir)
    labels = {"uptodate": "up to date", "restore": "would be restored from cache",
              "run": "would run"}
    for manifest in project.manifests:
        print(f"{manifest.name} ({manifest.display})")
        for item in statuses.of_manifest(project, manifest):
            print(f"  {item.stage:<10} {labels[item.state]}")
            for reason in item.reasons:
                print(f"      {reason}")
    return EXIT_OK


def schema(args: argparse.Namespace, cwd: Path) -> int:
    from edgebuild.manifest import schema as schemas

    text = schemas.render()
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return EXIT_OK


def init(args: argparse.Namespace, cwd: Path) -> int:
    from edgebuild.cli import scaffold

    for path in scaffold.init(Path(args.target), args.name, args.git):
        _err(f"wrote {path}")
    _err("next: run `edgebuild` in that directory")
    return EXIT_OK


def export(args: argparse.Namespace, cwd: Path) -> int:
    """Bring codegen up to date (like a build --until codegen), then copy model files."""
    from dataclasses import replace

    from edgebuild.build import runner as pipeline
    from edgebuild.codegen import export as exporting

    project = projects.load(args.paths, cwd, args.cache_dir)
    names = [m.name for m in project.manifests]
    name = args.name or (names[0] if len(names) == 1 else None)
    if name not in names:
        raise UserError(f"--name: choose one of {', '.join(names)}" if args.name or len(names) > 1
                        else "no manifest")
    project = replace(project, manifests=tuple(m for m in project.manifests if m.name == name))
    until = "ondevice" if "ondevice" in project.manifests[0].configs else "codegen"
    run = pipeline.run(project, until, options=pipeline.Options(debug=args.debug))
    if run.failures:
        return EXIT_USER_ERROR if run.user_error_only else EXIT_STAGE_FAILED
    written = exporting.export(exporting.sources(project.build_dir(name)), cwd / args.to, name,
                               args.force)
    _err(f"export: {len(written)} model files of {name} in {args.to}")
    return EXIT_OK


def import_ai8x(args: argparse.Namespace, cwd: Path) -> int:
    """`edgebuild import-ai8x`: a manifest (+ integer weights, + known answer) from a MAX7800x
    network description; nothing is overwritten silently (see network.import_network)."""
    from edgebuild.targets.max7800x import network

    shape = None
    if args.input:
        try:
            shape = tuple(int(v) for v in args.input.replace("x", ",").split(","))
        except ValueError:
            raise UserError(f"--input {args.input!r}: expected channels and sizes such as "
                            "1,28,28") from None

    def path(value: str | None) -> Path | None:
        return None if value is None else cwd / value

    result = network.import_network(cwd / args.network, checkpoint=path(args.checkpoint),
                                    sample=path(args.sample), expected=path(args.expected),
                                    device=args.device, name=args.name, input_shape=shape,
                                    out_dir=cwd / args.output)
    for warning in result.warnings:
        _err(f"warning: {warning}")
    _err(f"import-ai8x: wrote {result.manifest}; build it with `edgebuild build {result.manifest}`")
    return EXIT_OK


def compare_ai8x(args: argparse.Namespace, cwd: Path) -> int:
    """`edgebuild compare-ai8x A B`: whether two MSDK CNN projects (or their canonical JSON)
    program the accelerator identically — registers, start sequence, kernel and bias memory,
    input and expected output — whatever their C formatting (program.reader)."""
    from edgebuild.targets.max7800x.program import program, reader

    try:
        first, second = (reader.load(cwd / path) for path in (args.first, args.second))
    except reader.ProjectError as exc:
        raise UserError(f"compare-ai8x: {exc}") from None
    found = program.differences(first, second, 0)
    if not found:
        sizes = ", ".join(f"{part} {program.words(first, part)}" for part in reader.PARTS)
        print(f"identical ({sizes})")
        return EXIT_OK
    shown = found[:args.limit] if args.limit > 0 else found
    print(f"{len(found)} differences" + (f" (first {len(shown)})" if len(shown) < len(found)
                                        else "") + ":")
    print("\n".join(shown))
    return EXIT_STAGE_FAILED


def import_onnx(args: argparse.Namespace, cwd: Path) -> int:
    """`edgebuild import-onnx`: a manifest and its float weights (train.init) from an ONNX
    model; every node it cannot import is named at once (interchange.importer)."""
    from edgebuild.interchange import importer

    source = cwd / args.model
    name = args.name if args.name is not None else importer.default_name(source)
    importer.check_name(name)
    manifest = cwd / (args.output or ".")
    if manifest.is_dir() or not args.output or args.output.endswith(("/", os.sep)):
        manifest = manifest / f"{name}.yaml"  # -o DIR: the manifest goes in it
    data = None if args.data is None else cwd / args.data
    result = importer.import_onnx(source, manifest, name, data)
    for warning in result.warnings:
        _err(f"warning: {warning}")
    _err(f"import-onnx: wrote {result.manifest} and {result.weights.name}; "
         + ("build it" if data is not None else "add a dataset, then build it")
         + f" with `edgebuild build {result.manifest}`")
    return EXIT_OK


def import_tflite(args: argparse.Namespace, cwd: Path) -> int:
    """`edgebuild import-tflite`: a manifest in TFLite's number format, its integers and a
    known answer from an int8 .tflite model; every operator it cannot import is named at
    once (tflite.importer)."""
    from edgebuild.interchange import importer as onnx_importer
    from edgebuild.tflite import importer

    source = cwd / args.model
    name = args.name if args.name is not None else onnx_importer.default_name(source)
    onnx_importer.check_name(name)

    def path(value: str | None) -> Path | None:
        return None if value is None else cwd / value

    result = importer.import_tflite(source, cwd / args.output, name, args.device,
                                    path(args.sample), path(args.expected))
    for note in result.notes:
        _err(f"import-tflite: {note}")
    _err(f"import-tflite: wrote {result.manifest}; build it with "
         f"`edgebuild build {result.manifest}`")
    return EXIT_OK


def clean(args: argparse.Namespace, cwd: Path) -> int:
    from edgebuild.build.cache import remove_tree

    root, _ = projects.locate(args.paths, cwd)
    remove_tree(root / "build")
    _err(f"removed {root / 'build'}")
    if args.cache:
        cache_root = projects.load(args.paths, cwd, args.cache_dir).cache_root
        remove_tree(cache_root)
        _err(f"removed {cache_root}")
    return EXIT_OK


def cache(args: argparse.Namespace, cwd: Path) -> int:
    actions = {"gc": _gc, "verify": _verify, "push": _push, "pull": _pull, "ls": _ls}
    return actions[args.cache_command](args, cwd)


def _remote_of(args: argparse.Namespace, cwd: Path) -> tuple[Remote, projects.Project]:
    """The remote cache named by --remote, EDGEBUILD_REMOTE or edgebuild.toml (required)."""
    from edgebuild.build.remote import Remote

    project = projects.load(args.paths, cwd, args.cache_dir)
    url = settings.resolve(project.root, args.remote, None).remote
    if url is None:
        raise UserError("no remote cache: give --remote URL, set EDGEBUILD_REMOTE, or add "
                        f"[cache] remote = \"URL\" to {project.root / settings.FILE}")
    return Remote(url), project


@contextlib.contextmanager
def _remote_errors() -> Iterator[None]:
    """An explicit `cache push|pull|ls` whose remote fails is a user error (exit 2)."""
    from edgebuild.build.remote import RemoteError

    try:
        yield
    except RemoteError as exc:
        raise UserError(str(exc)) from None


def _push(args: argparse.Namespace, cwd: Path) -> int:
    """Upload local entries: those the manifests use (state records, lock), or --all."""
    from edgebuild.build import cache as caches

    remote, project = _remote_of(args, cwd)
    local = caches.Cache(project.cache_root)
    keep = None if args.all else _referenced(project)
    entries = [e for e in local.entries() if keep is None or e.key in keep]
    with _remote_errors():
        uploaded = sum(remote.push(entry) for entry in entries if not caches.problems(entry))
    _err(f"cache push: {uploaded} entries uploaded, {len(entries) - uploaded} already on "
         f"{remote.url}")
    return EXIT_OK


def _pull(args: argparse.Namespace, cwd: Path) -> int:
    """Download every entry edgebuild.lock names (then a build restores them locally)."""
    from edgebuild.build import cache as caches
    from edgebuild.build import lock as lockfile

    remote, project = _remote_of(args, cwd)
    local = caches.Cache(project.cache_root)
    from edgebuild.build import contracts
    from edgebuild.pipeline.stages import STAGES

    wanted = {(stage, entry["key"]): entry["digest"]
              for stages in lockfile.read(project.lock_path).values()
              for stage, entry in stages.items()}
    counts = {"fetched": 0, "local": 0, "missing": 0}
    with _remote_errors():
        for (stage, key), digest in sorted(wanted.items()):
            if local.lookup(stage, key) is not None:
                counts["local"] += 1
                continue
            accept = functools.partial(contracts.check, stage, STAGES[stage].artifacts) \
                if stage in STAGES else None  # the lock's digest and the stage's checks
            found = remote.fetch(local, stage, key, digest, accept)
            counts["fetched" if found else "missing"] += 1
    _err(f"cache pull: {counts['fetched']} entries fetched, {counts['local']} already local, "
         f"{counts['missing']} not on {remote.url}")
    return EXIT_OK


def _ls(args: argparse.Namespace, cwd: Path) -> int:
    """The remote's entries on stdout; `*` marks those this project's lock or tree uses."""
    remote, project = _remote_of(args, cwd)
    used = _referenced(project)
    with _remote_errors():
        entries = remote.entries()
    for item in sorted(entries, key=lambda e: (e.stage, e.key)):
        mark = "*" if item.key in used else " "
        print(f"{mark} {item.stage:<12} {item.key[:16]}  {item.files:4d} files "
              f"{item.size:12d} bytes  digest {item.digest[:16]}")
    _err(f"cache ls: {len(entries)} entries on {remote.url}, "
         f"{sum(e.key in used for e in entries)} used here (*)")
    return EXIT_OK


def _referenced(project: projects.Project) -> set[str]:
    """Keys the current manifests use: their materialized states and the lock file."""
    from edgebuild.build import lock as lockfile
    from edgebuild.build import outputs
    from edgebuild.pipeline.stages import STAGES

    keep = set()
    for manifest in project.manifests:
        for stage in STAGES:
            state = outputs.read_state(project.build_dir(manifest.name), stage)
            if state is not None:
                keep.add(state.key)
    for stages in lockfile.read(project.lock_path).values():
        keep.update(v["key"] for v in stages.values())
    return keep


def _gc(args: argparse.Namespace, cwd: Path) -> int:
    from edgebuild.build import cache as caches
    from edgebuild.core.fields import parse_bytes

    project = projects.load(args.paths, cwd, args.cache_dir)
    try:
        max_bytes = None if args.max_size is None else parse_bytes(args.max_size)
    except ValueError as exc:
        raise UserError(f"--max-size: {exc}") from None
    if args.max_age is not None and args.max_age < 0:
        raise UserError("--max-age must be a number of days >= 0")
    max_age = None if args.max_age is None else args.max_age * 86400
    cache = caches.Cache(project.cache_root)
    removed = caches.collect(cache, _referenced(project), max_bytes, max_age)
    for entry in removed:
        _err(f"deleted {entry.stage}/{entry.key[:16]}")
    swept = caches.sweep_temp(cache)
    _err(f"cache gc: deleted {len(removed)} entries and {swept} abandoned temporary "
         "directories")
    return EXIT_OK


def _verify(args: argparse.Namespace, cwd: Path) -> int:
    """Re-hash every entry; incomplete or unreadable ones, and ones whose bytes contradict
    edgebuild.lock under its key, count as corrupt (and --delete removes them too: the
    tool repairs its own cache)."""
    from edgebuild.build import cache as caches
    from edgebuild.build import lock as lockfile

    project = projects.load(args.paths, cwd, args.cache_dir)
    expected = {(stage, entry["key"]): entry["digest"]
                for stages in lockfile.read(project.lock_path).values()
                for stage, entry in stages.items()}
    found = caches.verify(caches.Cache(project.cache_root), expected)
    corrupt = [(stage, key, path, why) for stage, key, path, why in found if why]
    for stage, key, path, why in corrupt:
        _err(f"corrupt {stage}/{key[:16]}: {'; '.join(why)}")
        if args.delete:
            caches.remove_tree(path)
    deleted = f", {len(corrupt)} deleted" if args.delete and corrupt else ""
    _err(f"cache verify: {len(found)} entries, {len(corrupt)} corrupt{deleted}")
    return EXIT_OK if not corrupt or args.delete else EXIT_STAGE_FAILED
