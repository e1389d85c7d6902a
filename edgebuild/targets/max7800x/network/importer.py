"""`import_network`: a network description (+ quantized checkpoint, + known answer) becomes
an edgebuild manifest, its integer weights and its KAT files.

Input shape: the `input_shape` argument, else the sample's shape, else the dataset named in
the file (checked against the checkpoint's first layer when there is one; see
`description.DATASETS`). The class count names the outputs of a last linear (or 32-bit
output) layer when nothing else does (with a warning).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.targets.max7800x.network.built import Built
from edgebuild.targets.max7800x.network.checkpoint import checkpoint_layers, load_checkpoint
from edgebuild.targets.max7800x.network.description import DATASETS, dataset_key, parse
from edgebuild.targets.max7800x.network.files import npz_bytes, write_all
from edgebuild.targets.max7800x.network.hardware import HardwareLayer
from edgebuild.targets.max7800x.network.layers import Importer
from edgebuild.targets.max7800x.network.spec import Reporter, Spec
from edgebuild.targets.max7800x.network.text import manifest_text


@dataclass
class ImportResult:
    manifest: Path
    weights: Path | None
    kat_input: Path | None
    kat_expected: Path | None
    warnings: list[str]
    hardware_layers: list[HardwareLayer]
    kat_matches: bool | None = None  # the integer reference reproduces the known answer


def _device(device: str | None, arch: str | None, path: Path) -> tuple[str, str | None]:
    from edgebuild.targets.max7800x.profile import DEVICE_NAMES

    if device is not None:
        text = device.strip().lower()
        if text not in DEVICE_NAMES:
            raise UserError(f"--device {device!r}: a network description runs on "
                            f"{' or '.join(DEVICE_NAMES)}")
        return text, None
    for source in (arch or "", path.stem):
        lowered = source.lower()
        if lowered.startswith("ai87"):
            return "max78002", f"device max78002 from {source!r} (ai87 = MAX78002)"
        if lowered.startswith("ai85"):
            return "max78000", None
    return "max78000", None


def _input_shape(input_shape, sample_array, checkpoint, top, report, path) -> tuple[int, ...]:
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


def _load_npy(path: Path, what: str):
    import numpy as np

    try:
        return np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UserError(Diagnostic(str(path), f"{what} file not found")) from None
    except (ValueError, OSError) as exc:
        raise UserError(Diagnostic(str(path), f"{what} is not a .npy array: {exc}")) from None


def _check_sample(path: Path, array, shape: tuple[int, ...]) -> None:
    import numpy as np

    problems = []
    if tuple(array.shape) != shape and tuple(array.shape[1:]) != shape:
        problems.append(f"has shape {list(array.shape)}; the model input is {list(shape)} (one "
                        "sample, or a batch of them)")
    if not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
            and np.array_equal(array, np.round(array))):
        problems.append(f"holds {array.dtype} values; expected integers")
    elif array.size and (array.min() < -128 or array.max() > 127):
        problems.append(f"spans [{array.min()}, {array.max()}]; inputs are int8 values "
                        "[-128, 127]")
    if problems:
        raise UserError([Diagnostic(str(path), f"sample {p}") for p in problems])


def import_network(network_yaml: Path, *, checkpoint: Path | None = None,
                   sample: Path | None = None, expected: Path | None = None,
                   device: str | None = None, name: str | None = None,
                   input_shape: tuple | None = None, out_dir: Path = Path(".")) -> ImportResult:
    """Write `out_dir/<name>.yaml` (and `<name>/weights.npz`, the KAT files) from a network
    description; every problem of the description is reported at once as a `UserError`."""
    from pydantic import ValidationError

    from edgebuild.core.fields import _identifier
    from edgebuild.manifest import Manifest
    from edgebuild.model import folding
    from edgebuild.model import graph as graphs

    network_yaml, out_dir = Path(network_yaml), Path(out_dir)
    document, report, top, specs = parse(network_yaml)
    arch = top.get("arch", (None, None))[1]
    if "arch" not in top:
        report.warn((), "no `arch` (the toolchain requires it)")
    if expected is not None and sample is None:
        raise UserError("--expected needs --sample (the known answer belongs to a sample input)")
    sample_array = _load_npy(sample, "sample") if sample is not None else None
    expected_array = _load_npy(expected, "expected output") if expected is not None else None

    ck_layers = None
    if checkpoint is not None:
        state, ck_arch = load_checkpoint(Path(checkpoint))
        ck_layers = checkpoint_layers(Path(checkpoint), state)
        if arch is not None and ck_arch is not None and str(arch).lower() != ck_arch.lower():
            if str(arch).startswith("edgebuild_"):  # exported by edgebuild: a made-up arch
                report.warn((top["arch"][0],), (
                    f"arch {arch!r} (an edgebuild export) is not the checkpoint's {ck_arch!r}; "
                    "the layers are checked against the checkpoint instead"))
            else:
                report.error((top["arch"][0],), (
                    f"arch {arch!r} does not match the checkpoint's arch {ck_arch!r}: the "
                    "description and the checkpoint belong to different networks"))
    report.raise_errors()

    device_name, device_note = _device(device, None if arch is None else str(arch), network_yaml)
    if device_note:
        report.warnings.append(Diagnostic(str(network_yaml), device_note))
    shape = _input_shape(input_shape, sample_array, ck_layers, top, report, network_yaml)
    if sample_array is not None:
        _check_sample(Path(sample), sample_array, shape)
    classes = DATASETS.get(dataset_key(top.get("dataset", (None, None))[1]), (None, None))[1]

    importer = Importer(report, top, specs, classes, ck_layers,
                        Path(checkpoint) if checkpoint is not None else None)
    importer.assign_names()
    built = importer.build(shape)
    report.raise_errors()
    if ck_layers is None:
        report.warnings.append(Diagnostic(str(network_yaml), (
            "no checkpoint: the manifest has no weights; add a `dataset:` section so edgebuild "
            "can train it (or import again with --checkpoint)")))
    if built.shifts_ignored:
        report.warnings.append(Diagnostic(str(network_yaml), (
            f"output_shift ignored for {', '.join(built.shifts_ignored)}: without a checkpoint "
            "edgebuild chooses every layer's shift when it quantizes the trained model")))
    if built.from_maps:
        report.warnings.append(Diagnostic(str(network_yaml), (
            "without a checkpoint, output channels come from processor maps (one channel per "
            f"processor) for {', '.join(built.from_maps)}; a layer that runs in several passes "
            "has more: pass --checkpoint or add out_channels")))

    if name is not None:
        manifest_name = name
    else:
        manifest_name = re.sub(r"\W", "_", str(arch if arch is not None else network_yaml.stem))
    try:
        _identifier(manifest_name)
    except ValueError as exc:
        raise UserError(f"manifest name (--name): {exc}") from None
    manifest: dict[str, Any] = {
        "name": manifest_name,
        "model": {"input": list(shape), "layers": built.layers},
        **({"qat": {"overrides": {layer: {"weight_bits": bits}
                                  for layer, bits in built.weight_bits.items()}}}
           if built.weight_bits else {}),
        "target": {"device": device_name},
        "placement": {k: v for k, v in built.placement.items() if v},
    }
    files = out_dir / manifest_name
    weights_path = kat_input = kat_expected = None
    if ck_layers is not None:
        manifest["model"]["weights"] = f"{manifest_name}/weights.npz"
        weights_path = files / "weights.npz"
    if sample is not None:
        kat_input = files / f"input{Path(sample).suffix or '.npy'}"
        manifest["kat"] = {"input": f"{manifest_name}/{kat_input.name}"}
        if expected is not None:
            kat_expected = files / f"expected{Path(expected).suffix or '.npy'}"
            manifest["kat"]["expected"] = f"{manifest_name}/{kat_expected.name}"

    try:
        checked = Manifest.model_validate(manifest)
    except ValidationError as exc:
        raise UserError(_manifest_problems(report, specs, built, exc)) from None
    graph, problems = graphs.build(checked.model.input, checked.model.layers)
    if problems:
        raise UserError([report._diag(("layers", specs[built.origin[p.index]].index),
                                      f"layer {specs[built.origin[p.index]].index}: {p.message}")
                         for p in problems])
    if expected_array is not None:
        out = graph.output.out_shape
        if expected_array.size % math.prod(out):
            raise UserError(Diagnostic(str(expected), (
                f"expected output has shape {list(expected_array.shape)} but the last layer "
                f"outputs {list(out)}")))

    kat_matches = None
    if ck_layers is not None and sample_array is not None and expected_array is not None:
        kat_matches = _kat_check(checked, built.weights, sample_array, expected_array, folding)
        if not kat_matches:
            report.warnings.append(Diagnostic(str(expected), (
                "the integer reference of the imported model does not reproduce the expected "
                "output (different arithmetic, e.g. average pooling, or a mismatched sample?)")))

    def source(path) -> str:  # relative to the manifest, so the text does not name this machine
        try:
            return os.path.relpath(Path(path).resolve(), out_dir.resolve())
        except ValueError:  # another drive
            return str(path)

    header = [
        "Imported by `edgebuild import-ai8x` from the MAX7800x network description "
        f"{source(network_yaml)}",
        *([f"weights: {source(checkpoint)} (quantized checkpoint) -> "
           f"{manifest_name}/weights.npz"]
          if checkpoint is not None else ["no checkpoint: channel counts from processor maps; "
                                          "add a `dataset:` section to train the model"]),
        *([f"known answer: {source(sample)}" + (f" -> {source(expected)}" if expected else "")]
          if sample is not None else []),
        f"arch: {arch}, dataset: {top.get('dataset', (None, None))[1]}, input {list(shape)}",
        "placement: one entry per hardware layer, keyed by the layer that writes its output",
    ]
    notes = {}
    for hw in built.hardware:
        line = report.document.locate(("layers", hw.index))[0]
        notes[hw.name] = f"layer {hw.index}" + (f" (line {line})" if line else "")
    text = manifest_text(manifest, header, notes)

    manifest_path = out_dir / f"{manifest_name}.yaml"
    outputs: dict[Path, bytes] = {manifest_path: text.encode("utf-8")}
    if weights_path is not None:
        outputs[weights_path] = npz_bytes(built.weights)
    if kat_input is not None:
        outputs[kat_input] = Path(sample).read_bytes()
    if kat_expected is not None:
        outputs[kat_expected] = Path(expected).read_bytes()
    write_all(outputs)
    return ImportResult(manifest_path, weights_path, kat_input, kat_expected,
                        [d.render() for d in report.warnings], built.hardware, kat_matches)


def _manifest_problems(report: Reporter, specs: list[Spec], built: Built, exc) -> list:
    out = []
    for error in exc.errors():
        loc = error["loc"]
        message = error["msg"].removeprefix("Value error, ")
        if len(loc) >= 3 and loc[:2] == ("model", "layers") and isinstance(loc[2], int):
            spec = specs[built.origin[loc[2]]]
            out.append(report._diag(("layers", spec.index), f"layer {spec.index}: "
                                    f"{'.'.join(map(str, loc[3:]))}: {message}"))
        elif loc and loc[0] == "placement" and len(loc) > 1:
            spec = next((specs[built.origin[i]] for i, layer in enumerate(built.layers)
                         if layer["name"] == loc[1]), None)
            where = ("layers", spec.index) if spec else ()
            out.append(report._diag(where, f"{'.'.join(map(str, loc[2:]))}: {message}"))
        else:
            out.append(Diagnostic(report.document.path, f"{'.'.join(map(str, loc))}: {message}"))
    return out


def _kat_check(manifest, weights: dict, sample, expected, folding) -> bool:
    import numpy as np

    from edgebuild.model.quantized import QuantizedModel, run_reference
    from edgebuild.ops.operator import QuantParams

    layers, _ = folding.fold_layers(manifest.model.layers)
    params = {}
    for layer in layers:
        if f"{layer.name}.weight" in weights:
            bias = weights.get(f"{layer.name}.bias")
            params[layer.name] = QuantParams(
                weights[f"{layer.name}.weight"].astype(np.int64),
                None if bias is None else bias.astype(np.int64),
                int(weights[f"{layer.name}.scale_exp"]), int(weights[f"{layer.name}.bits"]))
    try:  # the device's rule (MAX7800x: half up, average pooling truncates)
        from edgebuild.model.policy import rounding_mode

        rounding = rounding_mode(manifest)
    except (ImportError, AttributeError):
        rounding = "half_up"
    model = QuantizedModel(tuple(manifest.model.input), layers, params, rounding)
    batch = sample if sample.ndim > len(manifest.model.input) else sample[None]
    out = run_reference(model, batch.astype(np.int64))
    return bool(np.array_equal(out.reshape(-1), np.asarray(expected).reshape(-1)))
