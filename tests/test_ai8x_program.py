"""The MAX7800x accelerator program equals the vendor synthesis tool's ("izer") on real
models: the canonical form of what edgebuild generates (registers, start sequence, kernel and
bias memory, input, expected output) is compared with committed canonical JSON that the
shared tool made of izer's own project for the same network, weights and input.

A case is (manifest with placement, weights.npz, input.npy, expected output of the last layer,
program.json): further cases plug in as entries of CASES. The izer corpus (tests/ai8x_cases.py
and tests/data/ai8x/cases/: random networks, other vendor models, MAX78002, each run through
izer) is checked case by case in this process (import-ai8x, the integer reference, the
generator: seconds each), and end to end (import-ai8x, `edgebuild build`, the project on disk
read back) for a few representative cases sharing one build.
"""

from __future__ import annotations

import gzip
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from edgebuild.core import document as yamlsource
from edgebuild.manifest import reading
from edgebuild.model import folding, policy
from edgebuild.targets.max7800x.program import build, device, program, reader, record, text

try:
    from tests import ai8x_cases
except ImportError:  # pytest run from tests/
    import ai8x_cases  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "ai8x"


@dataclass(frozen=True)
class Case:
    manifest: Path
    weights: Path
    sample: Path
    expected: Path
    golden: Path


CASES = {
    "mnist-extrasmall": Case(ROOT / "manifests/mnist_extrasmall.yaml",
                             ROOT / "manifests/mnist_extrasmall/weights.npz",
                             ROOT / "manifests/mnist_extrasmall/input.npy",
                             ROOT / "manifests/mnist_extrasmall/expected.npy",
                             DATA / "mnist-extrasmall/program.json"),
    # HWC input, 60 channels on 60 processors in all four quadrants, avg pool, bias, shift -1
    # on the 32-bit output (imported with `edgebuild import-ai8x`)
    "cifar-10-ai85net5": Case(DATA / "cifar-10-ai85net5/cifar10_ai85net5.yaml",
                              DATA / "cifar-10-ai85net5/cifar10_ai85net5/weights.npz",
                              DATA / "cifar-10-ai85net5/cifar10_ai85net5/input.npy",
                              DATA / "cifar-10-ai85net5/cifar10_ai85net5/expected.npy",
                              DATA / "cifar-10-ai85net5/program.json.gz"),
}


def golden(case: Case) -> dict:
    """The committed canonical JSON (gzip-compressed when large)."""
    if case.golden.suffix == ".gz":
        return json.loads(gzip.decompress(case.golden.read_bytes()))
    return json.loads(case.golden.read_text())


def generate(case: Case) -> program.Program:
    manifest = reading.parse(yamlsource.load(case.manifest))
    layers, _ = folding.fold_layers(manifest.model.layers)
    bits = {n: p.weight_bits for n, p in policy.resolve(manifest.qat, layers).items()}
    return build.for_manifest(manifest, bits, dict(np.load(case.weights)),
                              np.load(case.sample), np.load(case.expected))


def render(case: Case, name: str) -> dict[str, str]:
    return text.render(device.MAX78000, generate(case), text.Project(name, "MAX78000"))


@pytest.mark.parametrize("name", sorted(CASES))
def test_program_is_identical_to_the_vendor_tools(name):
    case = CASES[name]
    ours = generate(case).canonical()
    theirs = golden(case)
    assert program.differences(ours, theirs, 0) == []
    assert ours == theirs  # the same facts, not only no listed difference


def test_a_changed_weight_is_a_kernel_difference():
    case = CASES["mnist-extrasmall"]
    ours = generate(case).canonical()
    theirs = golden(case)
    kernels = dict(theirs["kernels"])
    first = sorted(kernels)[0]
    kernels[first] = "0x00000000"
    found = program.differences(ours, theirs | {"kernels": kernels}, 0)
    assert found == [f"kernels {first}: {ours['kernels'][first]} != 0x00000000"]


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_rendered_project_reads_back_to_the_vendor_tools_program(name, tmp_path):
    """The C text carries the program: edgebuild's reader recovers from the rendered MSDK
    project exactly the canonical program of the vendor's project."""
    for filename, body in render(CASES[name], name).items():
        (tmp_path / filename).write_text(body)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(text.FILES)
    assert reader.read(tmp_path) == golden(CASES[name])


def test_the_reader_reads_what_a_store_says_not_its_comment(tmp_path):
    files = render(CASES["mnist-extrasmall"], "mnist-extrasmall")
    files["cnn.c"] = files["cnn.c"].replace(
        "= 0x00000003; // Layer count", "= 0x00000002; // Layer count 0x00000003")
    for filename, body in files.items():
        (tmp_path / filename).write_text(body)
    found = program.differences(reader.read(tmp_path), golden(CASES["mnist-extrasmall"]), 0)
    assert found == ["registers 0x50100008: 0x00000002 != 0x00000003"]


def test_compare_ai8x_says_identical_or_lists_differences(tmp_path):
    for filename, body in render(CASES["mnist-extrasmall"], "mnist-extrasmall").items():
        (tmp_path / filename).write_text(body)
    same = subprocess.run(["edgebuild", "compare-ai8x", str(tmp_path),
                           str(CASES["mnist-extrasmall"].golden)],
                          capture_output=True, text=True, check=False)
    assert same.returncode == 0 and same.stdout.startswith("identical"), same
    other = subprocess.run(["edgebuild", "compare-ai8x", str(tmp_path),
                            str(CASES["cifar-10-ai85net5"].golden), "--limit", "2"],
                           capture_output=True, text=True, check=False)
    assert other.returncode == 1 and "differences (first 2)" in other.stdout, other
    assert len(other.stdout.splitlines()) == 3
    bad = subprocess.run(["edgebuild", "compare-ai8x", str(tmp_path / "cnn.c"), str(tmp_path)],
                         capture_output=True, text=True, check=False)
    assert bad.returncode == 2 and "not a canonical program" in bad.stderr, bad


@pytest.mark.parametrize(("dev", "facts"), [
    # addresses in izer's MAX78000 projects (mnist-extrasmall, cifar-10-ai85net5)
    (device.MAX78000, {("control", 0, 2): 0x50100008, ("control", 3, 0): 0x50d00000,
                       ("layer", 0, "rows", 0): 0x50100010, ("layer", 1, "rows", 0): 0x50500010,
                       ("layer", 0, "control2", 3): 0x50100a1c,
                       ("layer", 0, "post", 2): 0x50100798, ("kernel", 4, 0): 0x50190000,
                       ("bias", 0): 0x50108000, ("data", 4, 0): 0x50408000,
                       ("data", 8, 0x1000): 0x50411000}),
    # addresses in izer's project of a MAX78002 network (4 layers, quadrants 0 and 1)
    (device.MAX78002, {("control", 0, 2): 0x51000008, ("control", 1, 0): 0x52000000,
                       ("layer", 0, "rows", 0): 0x51100004, ("layer", 1, "rows", 1): 0x52100104,
                       ("layer", 0, "post", 3): 0x5110034c, ("layer", 0, "enables", 0): 0x51100048,
                       ("layer", 0, "oned", 3): 0x5110030c,
                       ("layer", 0, "output_channels", 1): 0x51100140,
                       ("layer", 0, "mask_offset", 2): 0x5110023c,
                       ("kernel", 0, 12): 0x51400030, ("kernel", 1, 12): 0x51420030,
                       ("bias", 1): 0x52180000, ("data", 4, 0): 0x51820000,
                       ("data", 8, 0): 0x51840000}),
], ids=["max78000", "max78002"])
def test_the_address_maps_are_the_devices(dev, facts):
    """Where registers and memories are, checked against addresses the vendor's tool
    writes."""
    def address(kind, *args):
        if kind == "layer":
            group, register, layer = args
            return dev.layer_register(group, getattr(dev.registers, register), layer)
        return {"control": dev.control, "kernel": dev.kernel_address,
                "bias": dev.bias_address, "data": dev.data_address}[kind](*args)

    assert {key: address(*key) for key in facts} == facts


CORPUS = ai8x_cases.case_names()


def imported_case(case: ai8x_cases.Case, tmp_path: Path):
    """A corpus case through import-ai8x (izer's checkpoint and sample): (manifest, integer
    weights, folded layers, weight width per layer, sample path)."""
    from edgebuild.core import arrays
    from edgebuild.targets.max7800x import network

    checkpoint, sample_path = ai8x_cases.write_inputs(case, tmp_path / "in")
    imported = network.import_network(case.network, checkpoint=checkpoint, sample=sample_path,
                                      device=case.device.lower(), out_dir=tmp_path / "out")
    assert imported.weights is not None
    manifest = reading.parse(yamlsource.load(imported.manifest))
    weights = dict(arrays.load(imported.weights))
    layers, _ = folding.fold_layers(manifest.model.layers)
    bits = {layer.name: int(weights[f"{layer.name}.bits"]) for layer in layers
            if f"{layer.name}.bits" in weights}
    return manifest, weights, layers, bits, sample_path


def generate_case(case: ai8x_cases.Case, tmp_path: Path) -> program.Program:
    """A corpus case's program made in this process, without a build: import-ai8x with
    izer's checkpoint and sample, the integer reference's output for the sample (what the
    evaluate stage computes), then the generator."""
    from edgebuild.targets.max7800x.network.kat import reference_output

    manifest, weights, _, bits, sample_path = imported_case(case, tmp_path)
    sample = np.load(sample_path)
    expected = reference_output(manifest, weights, sample)
    return build.for_manifest(manifest, bits, weights, sample, expected)


@pytest.mark.parametrize("name", CORPUS)
def test_every_corpus_program_is_izers(tmp_path, name):
    """Every corpus case, MAX78000 and MAX78002 ("ai87": its own counters, stride, prime
    counts, split mask registers, register clearing, kernels from the end of the larger
    memories, bias order), generated in this process: identical to izer's program (a case
    the generator refused would fail here: izer generated every one). What the plan stage's
    placement shows (maps.txt, plan.json, the report) is that program's."""
    case = ai8x_cases.load_case(name)
    made = generate_case(case, tmp_path)
    assert ai8x_cases.compare(ai8x_cases.expected_program(case), made.canonical()) == []
    placement_is_the_programs(tmp_path, made)


def placement_is_the_programs(tmp_path: Path, made: program.Program) -> None:
    """The placement the plan stage makes with the weights (the import in `tmp_path`) is
    where `made`, the program, puts kernels and biases: every layer's kernel slot is the one
    the program fills (with the weight bytes, equal kernels once), every bias slot holds the
    layer's values after its lead bytes (depthwise: each part, in broadcast order), and each
    quadrant's bias image ends where the last slot does."""
    from edgebuild.core import arrays
    from edgebuild.targets.max7800x import layout
    from edgebuild.targets.max7800x.placement import KernelSlot
    from edgebuild.targets.max7800x.placement.biasmemory import depthwise_order
    from edgebuild.targets.max7800x.program import duplicates
    from edgebuild.targets.max7800x.program import kernels as kmem
    from edgebuild.targets.max7800x.program.geometry import device_weights

    (manifest_path,) = (tmp_path / "out").glob("*.yaml")
    manifest = reading.parse(yamlsource.load(manifest_path))
    weights = dict(arrays.load(manifest_path.parent / manifest.model.weights))
    layers, _ = folding.fold_layers(manifest.model.layers)
    bits = {layer.name: int(weights[f"{layer.name}.bits"]) for layer in layers
            if f"{layer.name}.bits" in weights}
    hw, placed, problems = layout.layout(manifest, layers, bits, weights)
    assert problems == [] and placed is not None and placed.weights_known
    geo = build.geometries(hw, placed, {layer.name: layer for layer in layers}, weights)
    kernel_list = [device_weights(g, weights[f"{g.name}.weight"])
                   if layer.has_weights and f"{g.name}.weight" in weights else None
                   for g, layer in zip(geo, hw, strict=True)]
    _, slots = kmem.place(geo, kernel_list, placed.kernel_words, build.shared_kernels(placed))
    assert [plan.kernel for plan in placed.layers] == \
        [None if s is None else KernelSlot(s.offset, s.length) for s in slots]
    dev = device.device("ai87" if placed.device.lower() == "max78002" else "ai85")
    images = {dev.quadrant(address): values for address, values in made.bias}
    assert {q: len(v) for q, v in images.items()} == {
        q: max(o + n for g, _, o, n in placed.bias_map() if g == q)
        for q in {g for g, *_ in placed.bias_map()}}
    for g, plan in zip(geo, placed.layers, strict=True):
        values = duplicates.stored_bias(weights.get(f"{plan.name}.bias"))
        assert (values is None) == (plan.bias is None), plan.name
        if plan.bias is None or values is None:
            continue
        if plan.bias.parts:
            order = depthwise_order(g.processors, g.out_channels, g.broadcast)
            for q, offset, length in plan.bias.parts:
                assert len(order[q]) == length, plan.name
                assert [images[q][offset + k] for k, c in enumerate(order[q]) if c is not None] \
                    == [int(values[c]) & 0xFF for c in order[q] if c is not None], plan.name
            continue
        start = plan.bias.offset + plan.bias.lead
        assert list(images[plan.bias.group][start:start + len(values)]) == \
            [int(v) & 0xFF for v in values], plan.name


# The whole path a user takes, for one case of each kind: CHW input 8-bit (MAX78000), HWC
# multi-pass (128 channels), MAX78002 with mixed weight widths, an element-wise add, tied
# (deduplicated) kernels and biases, input streamed through the FIFO, a MAX78002 depthwise
# convolution.
END_TO_END = ("conv_chw_8bit", "multipass_128", "mixed_bits_max78002", "residual_add",
              "dedup_kernels", "streaming_hwc", "depthwise_max78002")


@pytest.fixture(scope="module")
def built_corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One project holding every END_TO_END case (import-ai8x of each), built to the
    accelerator stage by one `edgebuild build` of them all from an empty cache; returns the
    project directory."""
    root = tmp_path_factory.mktemp("corpus")
    for name in END_TO_END:
        case = ai8x_cases.load_case(name)
        checkpoint, sample = ai8x_cases.write_inputs(case, root / "in" / name)
        imported = subprocess.run(
            ["edgebuild", "import-ai8x", str(case.network), "--checkpoint", str(checkpoint),
             "--sample", str(sample), "--device", case.device.lower(), "--name", name, "-o",
             str(root / "project")], capture_output=True, text=True, check=False)
        assert imported.returncode == 0, imported.stderr
    built = subprocess.run(["edgebuild", "build", *(f"{name}.yaml" for name in END_TO_END),
                            "--until", "accelerator", "--cache-dir", str(root / "cache")],
                           cwd=root / "project", capture_output=True, text=True, check=False)
    assert built.returncode == 0, built.stderr
    return root / "project"


@pytest.mark.slow
@pytest.mark.parametrize("name", END_TO_END)
def test_the_build_writes_izers_program(built_corpus, name):
    """The built MSDK project on disk, read back by edgebuild's reader, is izer's program."""
    out = built_corpus / "build" / name
    made = record.ProgramRecord.load(out / "accelerator")
    assert not made.unsupported, made.unsupported
    assert ai8x_cases.compare(ai8x_cases.expected_program(ai8x_cases.load_case(name)),
                              reader.read(out / "max7800x")) == []


def test_a_max78002_project_reads_back_to_its_program(tmp_path):
    """The MAX78002 C text carries its program too: the clearing sequence's busy wait is
    no store, and the PLL clocking is the part's."""
    made = generate_case(ai8x_cases.load_case("conv_chw_8bit_max78002"), tmp_path)
    files = text.render(device.MAX78002, made, text.Project("c", "MAX78002"))
    for filename, body in files.items():
        (tmp_path / filename).write_text(body)
    assert reader.read(tmp_path) == made.canonical()
    assert "while ((*((volatile uint32_t *) 0x5100000c) & 0x02000000) != 0x02000000); " \
        "// Wait for clear" in files["cnn.c"]
    assert "MXC_S_GCR_PCLKDIV_CNNCLKSEL_IPLL" in files["main.c"]
    assert "MXC_F_GCR_IPLL_CTRL_RDY" in files["cnn.c"]


def test_both_families_have_an_address_map():
    assert device.device("ai85") is device.MAX78000
    assert device.device("ai87") is device.MAX78002


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_placement_puts_each_bias_where_the_program_loads_it(name):
    """One bias rule (placement.biasmemory.fit): the quadrant and offset the placement
    reports (maps.txt, report) hold the layer's bias bytes in the program's bias image."""
    from edgebuild.targets.max7800x import layout
    from edgebuild.targets.max7800x.placement.biasmemory import lead_bytes

    case = CASES[name]
    manifest = reading.parse(yamlsource.load(case.manifest))
    layers, _ = folding.fold_layers(manifest.model.layers)
    bits = {n: p.weight_bits for n, p in policy.resolve(manifest.qat, layers).items()}
    _, placed, problems = layout.layout(manifest, layers, bits)
    assert problems == [] and placed is not None
    images = {device.MAX78000.quadrant(address): values for address, values in generate(case).bias}
    weights = np.load(case.weights)
    checked = 0
    for plan in placed.layers:
        if plan.bias is None:
            continue
        stored = np.floor_divide(weights[f"{plan.name}.bias"].astype(np.int64), 128)
        start = plan.bias.offset + lead_bytes(plan.output_processors, plan.out_channels)
        assert list(images[plan.bias.group][start:start + len(stored)]) == \
            [int(v) & 0xFF for v in stored], plan.name
        checked += 1
    assert checked >= 1


def _kernel_slots_agree(manifest, bits: dict[str, int]) -> int:
    """Assert that every layer's kernel slot in the placement (validation, maps.txt, the
    report) is the program's (placement.kernelmemory's rule, filled with weight bytes);
    returns how many layers hold kernels. The bytes do not move a slot: zero weights do."""
    from edgebuild.targets.max7800x import layout
    from edgebuild.targets.max7800x.placement import KernelSlot
    from edgebuild.targets.max7800x.program import kernels as kmem

    layers, _ = folding.fold_layers(manifest.model.layers)
    hw, placed, problems = layout.layout(manifest, layers, bits)
    assert problems == [] and placed is not None
    geo = build.geometries(hw, placed, {layer.name: layer for layer in layers}, {})
    weights = [np.zeros(g.out_channels * g.in_channels * g.kernel_elements
                        * (g.pooled_dim[0] * g.pooled_dim[1] if g.flatten else 1))
               if layer.has_weights else None for g, layer in zip(geo, hw, strict=True)]
    widths = placed.kernel_words
    _, slots = kmem.place(geo, weights, widths)
    ours = [None if s is None else KernelSlot(s.offset, s.length) for s in slots]
    assert [plan.kernel for plan in placed.layers] == ours
    return sum(s is not None for s in ours)


@pytest.mark.parametrize("path", ["manifests/mnist_extrasmall.yaml",
                                  "manifests/digits_max78000.yaml",
                                  "tests/data/ai8x/cifar-10-ai85net5/cifar10_ai85net5.yaml"])
def test_the_placement_shows_the_programs_kernel_slots(path):
    """One kernel rule: the slots maps.txt and the report show are where the program loads."""
    manifest = reading.parse(yamlsource.load(ROOT / path))
    layers, _ = folding.fold_layers(manifest.model.layers)
    bits = {n: p.weight_bits for n, p in policy.resolve(manifest.qat, layers).items()}
    assert _kernel_slots_agree(manifest, bits) >= 2


@pytest.mark.parametrize("name", [
    "conv1d_hwc", "conv1d_chw_max78002", "conv_chw_2bit_max78002", "multipass_128",
    "multipass_linear_max78002", "extended_kernels_max78002", "vendor_kws20_hwc",
    "vendor_cifar100_ressimplenet", "conv_hwc_1bit", "pad_kernels"])
def test_the_placement_shows_the_corpus_programs_kernel_slots(tmp_path, name):
    """The same on corpus networks whose programs are izer's: sub-8-bit weights sharing a
    word, passes, flattening, gaps in output maps, MAX78002's larger memories (all but the
    last two got other slots from the placement's former in-order rule)."""
    from edgebuild.core import arrays
    from edgebuild.targets.max7800x import network

    case = ai8x_cases.load_case(name)
    checkpoint, sample = ai8x_cases.write_inputs(case, tmp_path / "in")
    imported = network.import_network(case.network, checkpoint=checkpoint, sample=sample,
                                      device=case.device.lower(), out_dir=tmp_path / "out")
    assert imported.weights is not None
    weights = arrays.load(imported.weights)
    bits = {key[:-len(".bits")]: int(value) for key, value in weights.items()
            if key.endswith(".bits")}
    assert _kernel_slots_agree(reading.parse(yamlsource.load(imported.manifest)), bits) >= 1


@pytest.mark.parametrize("name", ["streaming_hwc", "streaming_hwc_max78002"])
def test_a_streaming_project_reads_back_to_izers_program(tmp_path, name):
    """A network whose first layers stream: the rendered project carries izer's program (the
    stream registers, the FIFO set-up closing cnn_configure(), no data memory input), and
    main.c writes the sample to FIFO 0 after cnn_start(), one pixel's channels a word."""
    case = ai8x_cases.load_case(name)
    made = generate_case(case, tmp_path)
    dev = device.device("ai87" if case.device == "MAX78002" else "ai85")
    files = text.render(dev, made, text.Project("s", case.device))
    for filename, body in files.items():
        (tmp_path / filename).write_text(body)
    assert ai8x_cases.compare(ai8x_cases.expected_program(case), reader.read(tmp_path)) == []
    _, sample = ai8x_cases.generate(case)
    pixel = [int(v) & 0xFF for v in sample[:, 0, 0]]
    assert made.fifo[0][0] == pixel[0] | pixel[1] << 8 | pixel[2] << 16
    assert len(made.fifo[0]) == sample.shape[1] * sample.shape[2]
    main = files["main.c"]
    assert main.index("cnn_start();") < main.index("load_input(); // Load data input via FIFO")
    assert "*((volatile uint32_t *) 0x50000008) = *in0++;" in main


def _conv(name: str, kernel: int, streaming: bool = False):
    from edgebuild.targets.max7800x.program.geometry import Geometry

    pad = kernel // 2
    return Geometry(name=name, operator="conv2d", in_channels=4, out_channels=4,
                    in_dim=(8, 8), pooled_dim=(8, 8), out_dim=(8, 8), kernel=(kernel, kernel),
                    pad=(pad, pad), stride=(1, 1), pool=(1, 1), pool_stride=(1, 1),
                    average=False, relu=True, flatten=False, wide=False, weight_bits=8,
                    shift=0, big_data=False, processors=0xF, output_processors=0xF,
                    in_offset=0, out_offset=0x2000, write_gap=0, streaming=streaming)


def test_a_1x1_kernel_at_a_stream_runs_as_a_centred_3x3():
    """izer's EMULATE_1X1_STREAMING (both devices): a 1x1 convolution that streams or reads
    a streaming layer runs as 3x3 with padding 1, the weight at the kernel's centre; only
    within the layers streaming can reach."""
    from edgebuild.targets.max7800x.placement.kernelmemory import STREAM_REACH
    from edgebuild.targets.max7800x.program import geometry, stream

    layers = [_conv("a", 3, streaming=True), _conv("b", 1), _conv("c", 1)]
    widened = stream.padded_1x1(layers)
    assert [(g.kernel, g.pad) for g in widened] == [((3, 3), (1, 1)), ((3, 3), (1, 1)),
                                                    ((1, 1), (0, 0))]
    far = [_conv(f"p{i}", 3) for i in range(STREAM_REACH)]
    late = far + [_conv("s", 1, streaming=True)]
    assert stream.padded_1x1(late) == late
    weight = np.arange(16).reshape(4, 4, 1, 1)
    centred = geometry.device_weights(widened[1], weight)
    assert centred.shape == (4, 4, 3, 3) and np.array_equal(centred[..., 1, 1], weight[..., 0, 0])
    assert np.count_nonzero(centred) == np.count_nonzero(weight)


def test_a_buffer_shift_runs_right_before_the_layer_inserting_the_newest_frame():
    from edgebuild.targets.max7800x.hwlayer import HwLayer
    from edgebuild.targets.max7800x.program import sequence

    def hw(name, op, inputs):
        return HwLayer(name=name, members=(name,), op=op, inputs=inputs, in_channels=4,
                       in_shape=(4, 1, 1), pooled_shape=(4, 1, 1), out_channels=4,
                       out_shape=(4, 1, 1))

    layers = (hw("a", "conv2d", ("__input__",)), hw("b", "conv2d", ("a",)),
              hw("buf", "buffer", ("b",)), hw("c", "conv1d", ("buf",)))
    plans = ("pa", "pb", "pbuf", "pc")
    ordered, moved = sequence.run_order(layers, plans)  # type: ignore[arg-type]
    assert [h.name for h in ordered] == ["a", "buf", "b", "c"]
    assert moved == ("pa", "pbuf", "pb", "pc")
    plain = layers[:2]
    assert sequence.run_order(plain, plans[:2]) == (plain, plans[:2])  # type: ignore[arg-type]


@pytest.mark.parametrize("name", ["streaming_chw", "streaming_chw_max78002"])
def test_a_chw_streaming_project_reads_back_to_izers_program(tmp_path, name):
    """CHW input through the FIFOs: one channel per FIFO, four pixels a word, the first
    layer's big-data rollover, and (MAX78002) the control word's CHW-streaming bit; the
    rendered project carries izer's program."""
    case = ai8x_cases.load_case(name)
    made = generate_case(case, tmp_path)
    dev = device.device("ai87" if case.device == "MAX78002" else "ai85")
    for filename, body in text.render(dev, made, text.Project("s", case.device)).items():
        (tmp_path / filename).write_text(body)
    assert ai8x_cases.compare(ai8x_cases.expected_program(case), reader.read(tmp_path)) == []
    _, sample = ai8x_cases.generate(case)
    first = [int(v) & 0xFF for v in sample[1, 0, :4]]
    assert len(made.fifo) == 3
    assert made.fifo[1][0] == sum(v << 8 * i for i, v in enumerate(first))
    assert all(w.value >> 6 & 1 == (case.device == "MAX78002") for w in made.start)
