"""`import_network`: a network description (+ quantized checkpoint, + known answer) becomes
an edgebuild manifest, its integer weights and its KAT files.

Input shape: the `input_shape` argument, else the sample's shape, else the dataset named in
the file (checked against the checkpoint's first layer when there is one; see
`description.DATASETS`). The class count names the outputs of a last linear (or 32-bit
output) layer when nothing else does (with a warning).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.targets.max7800x import profile as devices
from edgebuild.targets.max7800x.network import vocabulary
from edgebuild.targets.max7800x.network.built import Built
from edgebuild.targets.max7800x.network.checkpoint import (
    CheckpointLayer,
    checkpoint_layers,
    load_checkpoint,
)
from edgebuild.targets.max7800x.network.checkpointfile import shown
from edgebuild.targets.max7800x.network.description import DATASETS, Top, dataset_key, parse
from edgebuild.targets.max7800x.network.export import EXPORT_HEADER
from edgebuild.targets.max7800x.network.files import npz_bytes, write_all
from edgebuild.targets.max7800x.network.hardware import HardwareLayer
from edgebuild.targets.max7800x.network.kat import (
    check_expected,
    check_sample,
    kat_matches,
    load_npy,
)
from edgebuild.targets.max7800x.network.layers import Importer
from edgebuild.targets.max7800x.network.spec import Reporter, Spec

if TYPE_CHECKING:
    from numpy.typing import NDArray
    from pydantic import ValidationError

    from edgebuild.manifest import Manifest
    from edgebuild.targets.max7800x.records import Profile
from edgebuild.targets.max7800x.network.text import manifest_text

# ai8xize.py's default --device (the manual: "--device Set device (default: MAX78000)")
_DEFAULT_DEVICE = "max78000"


@dataclass
class ImportResult:
    """The files written (None: not written), the warnings, and the hardware layers."""

    manifest: Path
    weights: Path | None
    kat_input: Path | None
    kat_expected: Path | None
    warnings: list[str]
    hardware_layers: list[HardwareLayer]
    kat_matches: bool | None = None  # the integer reference reproduces the known answer


def _device(device: str | None, arch: str | None, path: Path) -> tuple[str, str | None]:
    """(`--device`, else the device whose family (ai85, ai87: see the profiles) the arch or
    the file name starts with, else the toolchain's default; a note when the device was
    chosen by such a name)."""
    if device is not None:
        text = device.strip().lower()
        if text not in devices.DEVICE_NAMES:
            raise UserError(f"--device {device!r}: a network description runs on "
                            f"{' or '.join(devices.DEVICE_NAMES)}")
        return text, None
    for source in (arch or "", path.stem):
        lowered = source.lower()
        for name in devices.DEVICE_NAMES:
            family = devices.profile(name).family
            if lowered.startswith(family):
                note = None if name == _DEFAULT_DEVICE else \
                    f"device {name} from {source!r} ({family} = {name.upper()})"
                return name, note
    return _DEFAULT_DEVICE, None


def _input_shape(input_shape: Sequence[int] | None, sample_array: NDArray[Any] | None,
                 checkpoint: list[CheckpointLayer] | None, top: Top, report: Reporter,
                 path: Path) -> tuple[int, ...]:
    """See the module docstring."""
    if input_shape is not None:
        shape = tuple(int(d) for d in input_shape)
        if not 1 <= len(shape) <= 3 or any(d < 1 for d in shape):
            raise UserError(f"--input {list(input_shape)}: give C,L or C,H,W (positive integers)")
        return shape
    if sample_array is not None:  # one sample (C, H, W) / (C, L), or a batch of images
        return tuple(sample_array.shape[1:] if sample_array.ndim == 4 else sample_array.shape)
    written, dataset = top.get("dataset", (None, None))
    known = DATASETS.get(dataset_key(dataset))
    if known is not None:
        shape = known[0]
        if checkpoint is not None and checkpoint[0].weight.shape[1] != shape[0] \
                and checkpoint[0].weight.ndim > 2:
            raise UserError(report.document.diagnostic((written,), (
                f"dataset {dataset} has {shape[0]}-channel samples but the checkpoint's first "
                f"layer takes {checkpoint[0].weight.shape[1]} channels; pass --input C,H,W")))
        report.warn((written,), f"input shape {list(shape)} from the dataset {dataset}")
        return shape
    raise UserError(report.document.diagnostic((written,) if written else (), (
        f"the input shape is unknown (dataset {dataset!r} is not one of "
        f"{', '.join(sorted(DATASETS))}); pass --input C,H,W (or C,L), or a --sample")))


def import_network(network_yaml: Path, *, checkpoint: Path | None = None,
                   sample: Path | None = None, expected: Path | None = None,
                   device: str | None = None, name: str | None = None,
                   input_shape: tuple[int, ...] | None = None,
                   out_dir: Path = Path(".")) -> ImportResult:
    """Write `out_dir/<name>.yaml` (and `<name>/weights.npz`, the KAT files) from a network
    description; every problem of the description is reported at once as a `UserError`."""
    network_yaml, out_dir = Path(network_yaml), Path(out_dir)
    source = _read(network_yaml, checkpoint, sample, expected)
    report = source.report
    device_name, device_note = _device(device, None if source.arch is None else str(source.arch),
                                       network_yaml)
    if device_note:
        report.warnings.append(Diagnostic(str(network_yaml), device_note))
    shape = _input_shape(input_shape, source.sample, source.checkpoint, source.top, report,
                         network_yaml)
    if source.sample is not None:
        assert sample is not None  # source.sample is its array
        check_sample(Path(sample), source.sample, shape)
    built = _build(source, shape, checkpoint, devices.profile(device_name))
    manifest_name = _manifest_name(name, source.arch, network_yaml)
    manifest, files = _manifest(manifest_name, shape, device_name, built, out_dir,
                                source.checkpoint is not None, sample, expected)
    checked = _validate(source, built, manifest, expected)
    kat_matches = _kat(source, checked, built, expected)
    header = _header(source, out_dir, manifest_name, shape, checkpoint, sample, expected)
    text = manifest_text(manifest, header, _notes(report, built))
    outputs: dict[Path, bytes] = {files.manifest: text.encode("utf-8")}
    if files.weights is not None:
        outputs[files.weights] = npz_bytes(built.weights)
    if files.kat_input is not None:
        assert sample is not None  # kat_input is its copy (_manifest)
        outputs[files.kat_input] = Path(sample).read_bytes()
    if files.kat_expected is not None:
        assert expected is not None  # kat_expected is its copy (_manifest)
        outputs[files.kat_expected] = Path(expected).read_bytes()
    write_all(outputs)
    return ImportResult(files.manifest, files.weights, files.kat_input, files.kat_expected,
                        [d.render() for d in report.warnings], built.hardware, kat_matches)


@dataclass
class _Source:
    """What an import reads: the description (its top-level keys and layers, and the
    reporter that holds its warnings), the checkpoint's layers and the known answer."""

    path: Path
    report: Reporter
    top: Top
    specs: list[Spec]
    arch: Any  # the description's `arch` value (YAML), or None
    checkpoint: list[CheckpointLayer] | None
    sample: NDArray[Any] | None
    expected: NDArray[Any] | None


@dataclass(frozen=True)
class _Files:
    """The files an import writes (None: not written)."""

    manifest: Path
    weights: Path | None
    kat_input: Path | None
    kat_expected: Path | None


def _read(path: Path, checkpoint: Path | None, sample: Path | None,
          expected: Path | None) -> _Source:
    """Parse the description and load the other inputs; every problem of the description
    (and of the checkpoint against it) is raised at once."""
    _, report, top, specs = parse(path)
    arch = top.get("arch", (None, None))[1]
    if "arch" not in top:
        report.warn((), "no `arch` (the toolchain requires it)")
    if expected is not None and sample is None:
        raise UserError("--expected needs --sample (the known answer belongs to a sample input)")
    sample_array = load_npy(sample, "sample") if sample is not None else None
    expected_array = load_npy(expected, "expected output") if expected is not None else None
    ck_layers = _checkpoint(report, top, arch, Path(checkpoint), specs, path) \
        if checkpoint is not None else None
    report.raise_errors()
    return _Source(path, report, top, specs, arch, ck_layers, sample_array, expected_array)


def _checkpoint(report: Reporter, top: Top, arch: Any, path: Path, specs: list[Spec],
                description: Path) -> list[CheckpointLayer]:
    """The checkpoint's first N weight layers (N: the description's layers with weights, as
    the toolchain binds them; a warning names the weight tensors left out); its `arch` must
    be the description's (for a description edgebuild exported, a different arch is only
    noted: it is the manifest's name, and the layers are checked anyway)."""
    state, ck_arch = load_checkpoint(path)
    wanted = sum(vocabulary.computes(spec.op) for spec in specs)
    layers, ignored = checkpoint_layers(path, state, wanted)
    if ignored:
        listed = ", ".join(shown(key) for key in ignored[:_LISTED])
        more = f" and {len(ignored) - _LISTED:,} more" if len(ignored) > _LISTED else ""
        report.warnings.append(Diagnostic(str(path), (
            f"the description has {wanted} layers with weights; as the toolchain does, the "
            f"checkpoint's first {wanted} weight tensors are used and {len(ignored)} after "
            f"them ignored: {listed}{more}")))
    if arch is not None and ck_arch is not None and str(arch).lower() != ck_arch.lower():
        if _exported_by_edgebuild(description):
            report.warn((top["arch"][0],), (
                f"arch {arch!r} (an edgebuild export) is not the checkpoint's "
                f"{shown(ck_arch)!r}; "
                "the layers are checked against the checkpoint instead"))
        else:
            report.error((top["arch"][0],), (
                f"arch {arch!r} does not match the checkpoint's arch {shown(ck_arch)!r}: the "
                "description and the checkpoint belong to different networks"))
    return layers


# Weight tensors a warning names at most (a checkpoint could hold thousands after the N used)
_LISTED = 20


def _exported_by_edgebuild(description: Path) -> bool:
    """Whether the description is an edgebuild export (`export.HEADER` opens it)."""
    with open(description, encoding="utf-8", errors="replace") as file:
        head = file.read(400)
    return EXPORT_HEADER in head


def _build(source: _Source, shape: tuple[int, ...], checkpoint: Path | None,
           profile: Profile) -> Built:
    """The edgebuild layers, hardware layers and weights (every problem raised at once),
    and the warnings about what the description alone cannot say."""
    report, path = source.report, str(source.path)
    classes = DATASETS.get(dataset_key(source.top.get("dataset", (None, None))[1]),
                           (None, None))[1]
    importer = Importer(report, source.top, source.specs, classes, source.checkpoint,
                        Path(checkpoint) if checkpoint is not None else None, profile)
    importer.assign_names()
    built = importer.build(shape)
    report.raise_errors()
    if source.checkpoint is None:
        report.warnings.append(Diagnostic(path, (
            "no checkpoint: the manifest has no weights; add a `dataset:` section so edgebuild "
            "can train it (or import again with --checkpoint)")))
    if built.shifts_ignored:
        report.warnings.append(Diagnostic(path, (
            f"output_shift ignored for {', '.join(built.shifts_ignored)}: without a checkpoint "
            "edgebuild chooses every layer's shift when it quantizes the trained model")))
    if built.from_maps:
        report.warnings.append(Diagnostic(path, (
            "without a checkpoint, output channels come from processor maps (one channel per "
            f"processor) for {', '.join(built.from_maps)}; a layer that runs in several passes "
            "has more: pass --checkpoint or add out_channels")))
    return built


def _manifest_name(name: str | None, arch: Any, path: Path) -> str:
    """`--name`, else the arch (else the file's stem) made an identifier."""
    from edgebuild.core.fields import _identifier

    if name is not None:
        manifest_name = name
    else:
        manifest_name = re.sub(r"\W", "_", str(arch if arch is not None else path.stem))
    try:
        _identifier(manifest_name)
    except ValueError as exc:
        raise UserError(f"manifest name (--name): {exc}") from None
    return manifest_name


def _manifest(manifest_name: str, shape: tuple[int, ...], device: str, built: Built,
              out_dir: Path, weights: bool, sample: Path | None,
              expected: Path | None) -> tuple[dict[str, Any], _Files]:
    """The manifest document and the files it names (next to it, in `<name>/`)."""
    manifest: dict[str, Any] = {
        "name": manifest_name,
        "model": {"input": list(shape), "layers": built.layers},
        **({"qat": {"overrides": {layer: {"weight_bits": bits}
                                  for layer, bits in built.weight_bits.items()}}}
           if built.weight_bits else {}),
        "target": {"device": device},
        "placement": {k: v for k, v in built.placement.items() if v},
    }
    files = out_dir / manifest_name
    weights_path = kat_input = kat_expected = None
    if weights:
        manifest["model"]["weights"] = f"{manifest_name}/weights.npz"
        weights_path = files / "weights.npz"
    if sample is not None:
        kat_input = files / f"input{Path(sample).suffix or '.npy'}"
        manifest["kat"] = {"input": f"{manifest_name}/{kat_input.name}"}
        if expected is not None:
            kat_expected = files / f"expected{Path(expected).suffix or '.npy'}"
            manifest["kat"]["expected"] = f"{manifest_name}/{kat_expected.name}"
    return manifest, _Files(out_dir / f"{manifest_name}.yaml", weights_path, kat_input,
                            kat_expected)


def _validate(source: _Source, built: Built, manifest: dict[str, Any],
              expected: Path | None) -> Manifest:
    """The manifest as edgebuild reads it (schema and graph), its problems raised at the
    network layers they come from; the known answer must fit the model's output."""
    from pydantic import ValidationError

    from edgebuild.manifest import Manifest
    from edgebuild.model import graph as graphs

    report, specs = source.report, source.specs
    try:
        checked = Manifest.model_validate(manifest)
    except ValidationError as exc:
        raise UserError(_manifest_problems(report, specs, built, exc)) from None
    graph, problems = graphs.build(checked.model.input, checked.model.layers)
    if problems:
        raise UserError([report.diagnostic(("layers", specs[built.origin[p.index]].index),
                                           f"layer {specs[built.origin[p.index]].index}: "
                                           f"{p.message}")
                         for p in problems])
    assert graph is not None  # graphs.build gives a graph whenever it finds no problem
    if source.expected is not None:
        check_expected(expected, source.expected, graph.output.out_shape)
    return checked


def _kat(source: _Source, checked: Manifest, built: Built,
         expected: Path | None) -> bool | None:
    """Whether edgebuild's integer reference reproduces the known answer (None: no known
    answer, or no weights to run)."""
    if source.checkpoint is None or source.sample is None or source.expected is None:
        return None
    matches = kat_matches(checked, built.weights, source.sample, source.expected)
    if not matches:
        source.report.warnings.append(Diagnostic(str(expected), (
            "the integer reference of the imported model does not reproduce the expected "
            "output (different arithmetic, e.g. average pooling, or a mismatched sample?)")))
    return matches


def _header(source: _Source, out_dir: Path, manifest_name: str, shape: tuple[int, ...],
            checkpoint: Path | None, sample: Path | None, expected: Path | None) -> list[str]:
    """The manifest's opening comment: where it comes from, paths relative to it."""
    def relative(path: Path) -> str:  # so the text does not name this machine
        try:
            return os.path.relpath(Path(path).resolve(), out_dir.resolve())
        except ValueError:  # another drive
            return str(path)

    return [
        "Imported by `edgebuild import-ai8x` from the MAX7800x network description "
        f"{relative(source.path)}",
        *([f"weights: {relative(checkpoint)} (quantized checkpoint) -> "
           f"{manifest_name}/weights.npz"]
          if checkpoint is not None else ["no checkpoint: channel counts from processor maps; "
                                          "add a `dataset:` section to train the model"]),
        *([f"known answer: {relative(sample)}" + (f" -> {relative(expected)}" if expected else "")]
          if sample is not None else []),
        f"arch: {source.arch}, dataset: {source.top.get('dataset', (None, None))[1]}, "
        f"input {list(shape)}",
        "placement: one entry per hardware layer, keyed by the layer that writes its output",
    ]


def _notes(report: Reporter, built: Built) -> dict[str, str]:
    """Each hardware layer's comment: the network layer (and its line) it comes from."""
    notes = {}
    for hw in built.hardware:
        line = report.document.locate(("layers", hw.index))[0]
        notes[hw.name] = f"layer {hw.index}" + (f" (line {line})" if line else "")
    return notes


def _manifest_problems(report: Reporter, specs: list[Spec], built: Built,
                       exc: ValidationError) -> list[Diagnostic]:
    """Schema errors of the manifest, at the network layer each edgebuild layer or
    placement entry comes from."""
    out = []
    for error in exc.errors():
        loc = error["loc"]
        message = error["msg"].removeprefix("Value error, ")
        if len(loc) >= 3 and loc[:2] == ("model", "layers") and isinstance(loc[2], int):
            spec = specs[built.origin[loc[2]]]
            out.append(report.diagnostic(("layers", spec.index), f"layer {spec.index}: "
                                         f"{'.'.join(map(str, loc[3:]))}: {message}"))
        elif loc and loc[0] == "placement" and len(loc) > 1:
            source = next((specs[built.origin[i]] for i, layer in enumerate(built.layers)
                           if layer["name"] == loc[1]), None)
            where = ("layers", source.index) if source else ()
            out.append(report.diagnostic(where, f"{'.'.join(map(str, loc[2:]))}: {message}"))
        else:
            out.append(Diagnostic(report.document.path, f"{'.'.join(map(str, loc))}: {message}"))
    return out
