"""From a manifest file to a checked, typed manifest — or every problem at once.

Every problem reads `FILE:LINE:COL: field.path: message`. The YAML itself comes first
(syntax, duplicate keys, alias bombs: nothing else can be read without it); then, in one
round, the schema (manifest.reading: unknown keys with a "did you mean" or the section they
belong in, types, ranges) and the cross-field rules over the sections the schema accepted:
layer wiring and shapes (the rest needs them), the QAT overrides, the dataset's sample
shape and class count against the model, the float weights to start from (`train.init`),
and — once per target (manifest.targets) — imported integer weights (`model.weights`), the
known answer, the device's rules, on-device training and the memory budgets (every
`target.memory` size the plan stage will need, known from the architecture before any
training: memory.budget).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from edgebuild.core import document as yamlsource
from edgebuild.core.errors import Diagnostic, UserError
from edgebuild.core.geometry import pair
from edgebuild.data import FORMATS
from edgebuild.data.dataset import DataFileError, Probe, channelled_shape, framed_shape
from edgebuild.manifest import Layer, Manifest, targets
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import LayerBase, Role, Unsupported


@dataclass(frozen=True)
class Checked:
    """A manifest that passed every check, with what the checks computed. A manifest that
    lists several targets gives one `Checked` per target: `manifest.target` is that one,
    `target` its label, and `document` puts its problems on that target's lines."""

    path: Path
    document: yamlsource.Document
    manifest: Manifest
    graph: graphs.Graph
    probe: Probe | None  # None: no dataset (an imported model checked by its known answer)
    target: str | None = None  # the label, when the manifest lists several targets
    warnings: tuple[str, ...] = ()  # rendered diagnostics that do not stop the build

    @property
    def base(self) -> Path:
        return self.path.parent

    @property
    def name(self) -> str:
        """What names the build: `build/<name>/` (`<manifest>/<target>` for one of several)."""
        return self.manifest.name if self.target is None else f"{self.manifest.name}/{self.target}"


def load(path: Path, display: str | None = None, target: str | None = None) -> Checked:
    """The checked manifest for `target` (its label; None: the manifest has one target)."""
    found = load_all(path, display)
    for checked in found:
        if checked.target == target:
            return checked
    labels = ", ".join(str(c.target) for c in found)
    raise UserError(Diagnostic(found[0].document.path, (
        f"it lists the targets {labels}; name one" if target is None else
        f"it has no target {target!r} (targets: {labels})"), field="target"))


def load_all(path: Path, display: str | None = None) -> tuple[Checked, ...]:
    """Every target's checked manifest, or every problem of the file at once: schema and
    cross-field problems together (sections the schema rejected are left out of the checks
    that read them, so nothing is reported twice or from a guess)."""
    document = yamlsource.load(path, display)
    variants, problems, broken = targets.split(document)
    graph = None
    if variants:
        graph, found = _model_problems(variants[0], broken)
        problems += found
    checked: list[Checked] = []
    if graph is not None:
        probe, found = _dataset_problems(variants[0], Path(path).parent, graph, broken)
        problems += found
        if "train" not in broken and "model" not in broken:
            problems += _init(variants[0].document, variants[0].manifest, Path(path).parent,
                              graph)
        for variant in variants:
            warnings: list[str] = []
            if not broken & targets.READ_BY_DEVICE_CHECKS:
                found, warnings = _sources(variant.document, variant.manifest,
                                           Path(path).parent, graph)
                problems += found
            checked.append(Checked(Path(path), variant.document, variant.manifest, graph, probe,
                                   variant.target, tuple(warnings)))
    if problems:
        raise UserError(targets.in_file_order(problems))
    return tuple(checked)


def _model_problems(variant: targets.Variant, broken: frozenset[str]
                    ) -> tuple[graphs.Graph | None, list[Diagnostic]]:
    """The layer graph (None: the wiring is wrong) and the QAT overrides' problems."""
    try:
        graph = _graph(variant.document, variant.manifest)
    except UserError as exc:
        return None, exc.diagnostics
    return graph, [] if "qat" in broken else _overrides(variant.document, variant.manifest)


def _dataset_problems(variant: targets.Variant, base: Path, graph: graphs.Graph,
                      broken: frozenset[str]) -> tuple[Probe | None, list[Diagnostic]]:
    if variant.manifest.dataset is None or "dataset" in broken:
        return None, []
    return _dataset(variant.document, variant.manifest, base, graph)


def _sources(document: yamlsource.Document, manifest: Manifest, base: Path,
             graph: graphs.Graph) -> tuple[list[Diagnostic], list[str]]:
    """Imported weights, the known answer, the target device's rules, on-device training
    and the memory budgets: (problems, warnings)."""
    from edgebuild.model import folding, imported, knownanswer, policy
    from edgebuild.ondevice import trainable as ondevice
    from edgebuild.targets import numbers
    from edgebuild.targets.max7800x import layout as accelerator

    problems = []
    if manifest.dataset is None and manifest.model.weights is None:
        problems.append(document.diagnostic(("dataset",), (
            "required field is missing (only a model with pre-quantized `model.weights` can "
            "do without a dataset)")))
    if manifest.dataset is None and manifest.model.weights is not None and manifest.kat is None:
        problems.append(document.diagnostic(("kat",), (
            "a model without a dataset needs a known answer to be checked against: "
            "kat: {input: sample.npy, expected: output.npy}")))
    layers, _ = folding.fold_layers(manifest.model.layers)
    bits = None
    problems += _format_problems(document, manifest)
    if manifest.model.weights is not None and manifest.model.format.value == "tflite":
        from edgebuild.tflite import check as tflite_check

        folded_graph, _ = graphs.build(manifest.model.input, layers)
        found = tflite_check.check(base / manifest.model.weights, layers, folded_graph)
        problems += [document.diagnostic(("model", "weights", *suffix), message)
                     for suffix, message in found]
        bits = {layer.name: 8 for layer in layers if OPS[layer.op].computes}
    elif manifest.model.weights is not None:
        folded_graph, _ = graphs.build(manifest.model.input, layers)
        bits, found = imported.check(base / manifest.model.weights, layers, folded_graph,
                                     numbers.device_numbers(manifest.target.device.value))
        problems += [document.diagnostic(("model", "weights", *suffix), message)
                     for suffix, message in found]
    if manifest.kat is not None:
        try:
            knownanswer.read(base, manifest.kat, *knownanswer.shapes(manifest, graph))
        except knownanswer.KatFileError as exc:
            problems.append(document.diagnostic(("kat",), str(exc)))
    if bits is None:
        bits = {name: p.weight_bits for name, p in policy.resolve(manifest.qat, layers).items()}
    problems += [document.diagnostic(path, message)
                 for path, message in accelerator.problems(manifest, layers, bits)]
    problems += [document.diagnostic(path, message)
                 for path, message in ondevice.problems(manifest, layers)]
    if manifest.ondevice is not None and manifest.ondevice.weights is not None and not problems:
        problems += _wof(document, manifest, base, layers)
    budgets, warnings = _budgets(document, manifest, layers, bits)
    return problems + budgets, warnings


def _format_problems(document: yamlsource.Document, manifest: Manifest) -> list[Diagnostic]:
    """The number format (`model.format`, formats.numbers): every deployed layer has an integer
    reference and C in it; TFLite's needs its weights file and a CPU target; asymmetric
    padding is TFLite's only."""
    from edgebuild.formats import numbers as formats
    from edgebuild.targets.max7800x import profile as devices

    fmt = manifest.model.format.value
    problems = []
    if fmt != formats.OWN and manifest.model.weights is None:
        problems.append(document.diagnostic(("model", "format"), (
            f"the {fmt} format computes with the integers of `model.weights` (a model "
            f"`edgebuild import-{fmt}` wrote); give them, or leave the format out")))
    device = manifest.target.device.value
    if fmt != formats.OWN and devices.is_accelerator(device):
        problems.append(document.diagnostic(("target", "device"), (
            f"{device}: the accelerator computes in its own number format (power-of-two "
            f"scales, no zero points), not {fmt}'s; build this model for host or cortex-m4")))
    for index, layer in enumerate(manifest.model.layers):
        if not OPS[layer.op].deployed:
            continue
        for facet in (formats.reference(layer.op, fmt), formats.c(layer.op, fmt)):
            if isinstance(facet, Unsupported):
                problems.append(document.diagnostic(("model", "layers", index, "op"),
                                                    f"{layer.op}: {facet.reason}"))
                break
        if getattr(layer, "pad_end", None) is not None and fmt == formats.OWN:
            problems.append(document.diagnostic(("model", "layers", index, "pad_end"), (
                "asymmetric padding is computed only in TFLite's number format "
                "(`model.format: tflite`); in edgebuild's own use `pad` alone")))
        if layer.op == "pool2d" and fmt == formats.OWN and any(pair(layer.pad)):
            problems.append(document.diagnostic(("model", "layers", index, "pad"), (
                "a padded pooling window (counting the input's values only) is computed "
                "only in TFLite's number format (`model.format: tflite`); in edgebuild's own "
                "the windows stay inside the input: leave `pad` out")))
    return problems


def _budgets(document: yamlsource.Document, manifest: Manifest, layers: tuple[Layer, ...],
             bits: Mapping[str, int]) -> tuple[list[Diagnostic], list[str]]:
    """The memory budgets: (problems, warnings). On an accelerator target the RAM of the
    Cortex-M4 emulation is a warning only (targets.max7800x.emulation says why); so is an
    L1 budget whose tiles need more RAM than the untiled build (memory.budget.warnings)."""
    from edgebuild.memory import budget
    from edgebuild.targets.max7800x import emulation
    from edgebuild.targets.max7800x import profile as devices

    device = manifest.target.device.value
    accelerated = devices.is_accelerator(device)
    needs = budget.assess(manifest, layers, bits, optimized(manifest))
    problems = [document.diagnostic(path, message) for path, message in
                budget.shortfalls(needs, manifest.target.memory, ram=not accelerated)]
    costs = [document.diagnostic(path, f"warning: {message}").render()
             for path, message in budget.warnings(needs, manifest.target.memory)]
    if not accelerated:
        return problems, costs
    fit = emulation.fit(device, manifest.target.memory.l2, needs.ram.bytes)
    return problems, costs if fit.fits else [*costs, document.diagnostic(
        ("target", "memory", "l2"), f"warning: {fit.reason()}; the accelerator program and "
        "the host known-answer test still build, its Cortex-M4 (QEMU) run is skipped").render()]


def optimized(manifest: Manifest) -> bool:
    """Whether the target runs the optimized kernels (their workspace counts in RAM)."""
    from edgebuild.codegen.project import OPTIMIZED_CPUS
    from edgebuild.targets.cpu import cpu

    return cpu(manifest.target.device.value) in OPTIMIZED_CPUS


def _init(document: yamlsource.Document, manifest: Manifest, base: Path,
          graph: graphs.Graph) -> list[Diagnostic]:
    """Float weights to start from (`train.init`): a readable file that fits the layers;
    `epochs: 0` needs them (nothing else makes a float model)."""
    from edgebuild.model import initial

    train = manifest.train
    if manifest.model.weights is not None:
        return [] if train.init is None else [document.diagnostic(("train", "init"), (
            "the model has pre-quantized `model.weights` and is not trained; remove one of "
            "the two"))]
    if train.init is not None:
        found = initial.check(base / train.init, manifest.model.layers, graph)
        return [document.diagnostic(("train", "init"), message)
                for message in found or _not_finite(base / train.init)]
    if train.epochs == 0:
        return [document.diagnostic(("train", "epochs"), (
            "0 epochs train nothing: give the float weights to take as they are in "
            "`train.init` (e.g. from `edgebuild import-onnx`), or train at least one epoch"))]
    return []


def _not_finite(path: Path) -> list[str]:
    """A NaN or infinity in the float weights passes every shape check, then spreads
    through training (or, with `epochs: 0`, quantization) into a model of garbage: one
    message per array that holds any. The file was read once already (initial.check)."""
    import numpy as np

    from edgebuild.core import arrays

    problems = []
    for key, value in arrays.load(path).items():
        if value.dtype.kind not in "fc":
            continue
        bad = int(np.count_nonzero(~np.isfinite(value)))
        if bad:
            kinds = " and ".join(k for k, test in (("NaN", np.isnan), ("infinite", np.isinf))
                                 if test(value).any())
            problems.append(f"{path.name}: array {key!r} holds {kinds} values ({bad} of "
                            f"{value.size}); float weights must be finite numbers")
    return problems


def _wof(document: yamlsource.Document, manifest: Manifest, base: Path,
         layers: tuple[LayerBase, ...]) -> list[Diagnostic]:
    """The starting weights file must match the trainable tensors (magic, version, layout)."""
    from edgebuild.ondevice import trainable as ondevice
    from edgebuild.ondevice import wof

    assert manifest.ondevice is not None and manifest.ondevice.weights is not None  # see caller
    resolved = ondevice.resolve(manifest.ondevice, layers, tuple(manifest.model.input),
                                manifest.target.memory.l1)
    try:
        wof.read(base / manifest.ondevice.weights, resolved.graph.parameters())
    except UserError as exc:
        return [document.diagnostic(("ondevice", "weights"), f"{manifest.ondevice.weights}: "
                                                              f"{d.message}")
                for d in exc.diagnostics]
    return []


def _graph(document: yamlsource.Document, manifest: Manifest) -> graphs.Graph:
    graph, problems = graphs.build(manifest.model.input, manifest.model.layers)
    if problems:
        raise UserError([document.diagnostic(
            ("model", "layers", p.index, *((p.field,) if p.field else ())), p.message)
            for p in problems])
    assert graph is not None  # graphs.build gives a graph whenever it finds no problem
    if not any(OPS[layer.op].role in (Role.compute, Role.data) for layer in manifest.model.layers):
        ops = ", ".join(sorted({layer.op for layer in manifest.model.layers}))
        raise UserError(document.diagnostic(("model", "layers"), (
            f"the model computes nothing: its layers ({ops}) pass their input on as it is "
            "or are gone once trained; add a layer that computes (a convolution, linear or "
            "pooling layer)")))
    return graph


def _overrides(document: yamlsource.Document, manifest: Manifest) -> list[Diagnostic]:
    ops = "/".join(op.name for op in OPS.values() if op.computes)
    compute = {layer.name for layer in manifest.model.layers if OPS[layer.op].computes}
    return [document.diagnostic(("qat", "overrides", name), (
        f"override names no {ops} layer; layers with weights: "
        f"{', '.join(sorted(compute))}")) for name in manifest.qat.overrides if name not in compute]


def _sample_mismatch(shape: tuple[int, ...], expected: tuple[int, ...], manifest: Manifest) -> str:
    """Why the dataset's samples do not fit the model, and what to set."""
    assert manifest.dataset is not None  # called for a manifest with a dataset only
    frames = graphs.frames(manifest.model.layers)
    have = f"the dataset's samples have shape {list(shape)}"
    if manifest.dataset.frames is not None and frames == 1:
        return (f"{have} (clips of dataset.frames={manifest.dataset.frames}) but the model has no "
                "buffer layer to read clips; remove dataset.frames or add a buffer")
    if frames == 1:
        return f"{have} but model.input is {list(manifest.model.input)}; " + _input_advice(
            shape, tuple(manifest.model.input), manifest.dataset.channel_axis.value)
    if len(shape) == len(expected) and shape[0] == frames:
        return (f"{have}: clips of {frames} frames of {list(shape[1:])}, but model.input is "
                f"{list(manifest.model.input)}; set model.input: {list(shape[1:])}")
    return (f"{have}, but the model's buffer needs clips of {frames} frames of "
            f"{list(manifest.model.input)}, i.e. {list(expected)}; set dataset.frames: {frames} to "
            "cut each sample's last axis into frames, or give clip-shaped samples")


def _reading(shape: tuple[int, ...]) -> str:
    """What model.input `shape` makes of a sample (channels first)."""
    if len(shape) == 1:
        return f"{shape[0]} features (linear layers)"
    channels = "one channel" if shape[0] == 1 else f"{shape[0]} channels"
    if len(shape) == 2:
        return f"{channels} over {shape[1]} steps (a 1-D model: conv1d, pool1d)"
    return f"{channels} of {shape[1]}x{shape[2]} (a 2-D model: conv2d, pool2d)"


def _input_advice(shape: tuple[int, ...], wanted: tuple[int, ...], axis: str) -> str:
    """What to set when the samples do not have model.input's shape: a channel axis the
    samples lack or hold last (dataset.channel_axis), or model.input itself — saying what
    each reading means, since [49, 10] as model.input is 49 channels, not one 49x10 image."""
    as_is = (f"set model.input: {list(shape)} to read them as {_reading(shape)}"
             if len(shape) <= 3 else "")
    alternative = f"; or {as_is}" if as_is else ""
    if axis == "first" and wanted == (1, *shape):
        return ("the samples have no channel axis: set dataset.channel_axis: add to read them "
                f"as {_reading(wanted)}, as model.input says{alternative}")
    if axis == "first" and len(shape) > 1 and wanted == (shape[-1], *shape[:-1]):
        return ("the samples hold their channels last: set dataset.channel_axis: last to read "
                f"them as {_reading(wanted)}, as model.input says{alternative}")
    if axis == "add" and shape[1:] == wanted:
        return "remove dataset.channel_axis: add (without it the samples have the model's shape)"
    return as_is or ("samples of more than 3 axes fit no model.input; reshape them to [C, L] "
                     "or [C, H, W]")


def _dataset(document: yamlsource.Document, manifest: Manifest, base: Path,
             graph: graphs.Graph) -> tuple[Probe | None, list[Diagnostic]]:
    """(the dataset's probe, its problems: unreadable, or samples or classes that do not fit
    the model)."""
    spec = manifest.dataset
    assert spec is not None  # called for a manifest with a dataset only
    try:
        probe = FORMATS[spec.format].probe(spec, base)
    except DataFileError as exc:
        return None, [document.diagnostic(("dataset", *exc.field), str(exc))]
    try:
        shape = framed_shape(channelled_shape(probe.sample_shape, spec.channel_axis),
                             spec.frames)
    except DataFileError as exc:
        return None, [document.diagnostic(("dataset", "frames"), str(exc))]
    problems = _normalize_channels(document, manifest, channelled_shape(
        probe.sample_shape, spec.channel_axis))
    expected = graphs.sample_shape(manifest.model.input, manifest.model.layers)
    if shape != expected:
        problems.append(document.diagnostic(("model", "input"), _sample_mismatch(
            shape, expected, manifest)))
    outputs = math.prod(graph.output.out_shape)
    if outputs != probe.classes:
        problems.append(document.diagnostic(("model", "layers", len(graph.nodes) - 1), (
            f"the last layer has {outputs} outputs but the dataset has {probe.classes} classes")))
    return probe, problems


def _normalize_channels(document: yamlsource.Document, manifest: Manifest,
                        sample: tuple[int, ...]) -> list[Diagnostic]:
    """`normalize: {method: scale}` with a value per channel: as many as a sample has
    channels (its first axis, before frames are cut)."""
    assert manifest.dataset is not None  # called for a manifest with a dataset only
    normalize = manifest.dataset.normalize
    given = normalize.channels()
    if given is None or given == sample[0]:
        return []
    field = "scale" if isinstance(normalize.scale, tuple) else "offset"
    channels = "one channel" if sample[0] == 1 else f"{sample[0]} channels"
    return [document.diagnostic(("dataset", "normalize", field), (
        f"{given} values, one per channel, but the samples ({list(sample)}) have {channels} "
        "(their first axis); give a value per channel, or one for all"))]
