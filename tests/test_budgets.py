"""`edgebuild check` rejects every `target.memory` budget the plan stage cannot meet, before
any training (edgebuild/memory/budget.py): L1 below a layer's smallest tile, L2 below the
arena, flash below the stored weights — each naming the field's position, what was given,
what is needed and by which layer; all in one run; and exactly: a budget equal to the need
passes `check` and `build --until plan`, one byte less fails `check`."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import DIGITS_MANIFEST, REPO, example_targets, run_cli, write

from edgebuild.core import arrays, packing
from edgebuild.manifest import Manifest
from edgebuild.memory import budget, tiling
from edgebuild.memory.plan import make_plan, tile_steps
from edgebuild.model import folding
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS

EXAMPLES = sorted((REPO / "manifests").glob("*.yaml"))

# conv1 + batchnorm (folded: conv1 gets a bias), conv2 with 4-bit weights, a pool, a wide
# linear layer; little data and one epoch of each training, for `build --until plan`.
BUDGET_MANIFEST = """\
name: {name}
seed: 1
dataset:
  format: sklearn-digits
  split: {{val: 0.1, test: 0.2}}
  limit: {{train: 120, test: 40}}
model:
  input: [1, 8, 8]
  layers:
    - {{name: conv1, op: conv2d, out: 8, kernel: 3, pad: 1, bias: false}}
    - {{name: bn1, op: batchnorm, act: relu}}
    - {{name: conv2, op: conv2d, out: 8, kernel: 3, pad: 1, act: relu}}
    - {{name: pool, op: pool2d, mode: max, size: 2}}
    - {{name: fc, op: linear, out: 10, flatten: true, wide: true}}
train: {{epochs: 1, batch: 64}}
qat: {{epochs: 1, overrides: {{conv2: {{weight_bits: 4}}}}}}
target:
  device: host
  memory: {{l1: {l1}, l2: {l2}, flash: {flash}}}
"""

NEED = re.compile(r"target\.memory\.(l1|l2|flash): .*?needs at least (\d+) bytes")


def _digits(tmp_path: Path, memory: str) -> Path:
    text = DIGITS_MANIFEST.format(name="small").replace(
        "memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}", f"memory: {memory}")
    return write(tmp_path / "manifests" / "small.yaml", text)


def _position(path: Path, key: str) -> str:
    """`FILE:LINE:COL` of `key:` in the manifest (where its diagnostic points)."""
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if f"{key}:" in line:
            return f"{path.name}:{number}:{line.index(f'{key}:') + 1}"
    raise AssertionError(key)


def _lines(result: subprocess.CompletedProcess) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def _needs(stderr: str) -> dict[str, int]:
    return {field: int(size) for field, size in NEED.findall(stderr)}


# ---- the messages ------------------------------------------------------------------------

def test_l1_below_the_smallest_tile_names_the_layer_and_its_need(tmp_path):
    path = _digits(tmp_path, "{l1: 64, l2: 128KiB, flash: 512KiB}, "
                             "tiling: {double_buffer: true}")
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    # fc (linear, 512 -> 10, wide): one output feature per slot, input 512 + weights 512 +
    # bias 4 + int32 output 4 = 1032 bytes, two slots (asked for); conv1 needs
    # 2 x (32 + 12 + 4 + 8)
    assert _lines(result) == [
        f"manifests/{_position(path, 'l1')}: target.memory.l1: 64 B is too small: layer fc "
        "needs at least 2064 bytes (its smallest tile: 1 output feature, double buffered: "
        "2 x 1032 bytes: input 512, weights 512, bias 4, output 4); other layers over the "
        "budget: conv1 112 bytes"]
    assert "Traceback" not in result.stderr


def test_l1_names_a_convolution_and_its_tile(tmp_path):
    path = write(tmp_path / "manifests" / "b.yaml",
                 BUDGET_MANIFEST.format(name="b", l1=64, l2="128KiB", flash="512KiB"))
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    # conv2 (8 -> 8 channels, 3x3, pad 1, 8x8): one output row of one channel reads 3 padded
    # input rows of 8 channels (8 x 3 x 10 = 240), 72 weights, a bias, 8 outputs, in one
    # slot (the default: the core copies, so a second slot would hide nothing); conv1's
    # smallest tile (56 bytes) fits
    assert _lines(result) == [
        f"manifests/{_position(path, 'l1')}: target.memory.l1: 64 B is too small: layer conv2 "
        "needs at least 324 bytes (its smallest tile: 1 output row x 1 channel, 324 bytes: "
        "input 240, weights 72, bias 4, output 8); other layers over the budget: fc 264 bytes"]


def test_ram_below_the_arena(tmp_path):
    path = _digits(tmp_path, "{l1: 16KiB, l2: 100, flash: 512KiB}")
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    assert _lines(result) == [
        f"manifests/{_position(path, 'l2')}: target.memory.l2: 100 B is too small: the "
        "activation arena needs at least 576 bytes (at layer conv1 these tensors are live "
        "together: input 64, conv1 512 bytes)"]


def test_flash_below_the_weights(tmp_path):
    path = _digits(tmp_path, "{l1: 16KiB, l2: 128KiB, flash: 1KiB}")
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    # conv1: 8 x 1 x 3 x 3 weights + 8 int32 biases; fc: 10 x 512 + 10 int32 biases
    assert _lines(result) == [
        f"manifests/{_position(path, 'flash')}: target.memory.flash: 1024 B is too small: "
        "storing the weights needs at least 5264 bytes (fc 5160, conv1 104 bytes: one byte "
        "per 8-bit weight, 1-, 2- and 4-bit weights packed, four bytes per bias; code needs "
        "flash besides)"]


def test_every_budget_problem_at_once_with_the_other_semantic_errors(tmp_path):
    path = _digits(tmp_path, "{l1: 64, l2: 100, flash: 200}")
    path.write_text(path.read_text().replace("qat: {epochs: 1}\n", "")  # last, below target
                    + "qat: {epochs: 1, overrides: {nope: {weight_bits: 4}}}\n")
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    lines = _lines(result)
    assert [line.split(": ")[1] for line in lines] == [  # in the order of the file's lines
        "target.memory.l1", "target.memory.l2", "target.memory.flash", "qat.overrides.nope"]
    assert _needs(result.stderr) == {"l1": 1032, "l2": 576, "flash": 5264}
    assert [line.split(": ")[0] for line in lines[:3]] == [
        f"manifests/{_position(path, key)}" for key in ("l1", "l2", "flash")]


def test_a_default_budget_says_so(tmp_path):
    write(tmp_path / "manifests" / "small.yaml", DIGITS_MANIFEST.format(name="small").replace(
        "memory: {l1: 16KiB, l2: 128KiB, flash: 512KiB}", "memory: {l2: 100}"))
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2 and len(_lines(result)) == 1, result.stderr
    assert "target.memory.l2: 100 B is too small" in result.stderr


# ---- exact: the need passes check and plan, one byte less fails check ---------------------

def test_the_reported_minimum_builds_through_plan_and_one_byte_less_does_not_check(tmp_path):
    manifest = tmp_path / "manifests" / "b.yaml"
    write(manifest, BUDGET_MANIFEST.format(name="b", l1=8, l2=8, flash=8))
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stderr
    need = _needs(result.stderr)
    assert set(need) == {"l1", "l2", "flash"}, result.stderr

    for field in need:  # one byte below in one field: exactly that field fails
        below = {**need, field: need[field] - 1}
        write(manifest, BUDGET_MANIFEST.format(name="b", **below))
        result = run_cli(["check"], tmp_path, timeout=120)
        assert result.returncode == 2, result.stderr
        assert _needs(result.stderr) == {field: need[field]}, result.stderr

    write(manifest, BUDGET_MANIFEST.format(name="b", **need))
    assert run_cli(["check"], tmp_path, timeout=120).returncode == 0
    result = run_cli(["build", "--until", "plan"], tmp_path)
    assert result.returncode == 0, result.stderr
    plan = json.loads((tmp_path / "build" / "b" / "plan" / "plan.json").read_text())
    assert plan["arena_bytes"] + plan["state_bytes"] == need["l2"]
    assert plan["memory"]["l1_peak"] == need["l1"]  # conv2 runs in its smallest tile
    weights = arrays.load(tmp_path / "build" / "b" / "quantize" / "weights.npz")
    bits = {"conv2.weight": 4}  # qat.overrides: stored packed, two weights a byte
    stored = sum(packing.stored_bytes(a.shape, bits[name]) if name in bits else a.nbytes
                 for name, a in weights.items())
    assert plan["weight_bytes"] == stored == need["flash"]
    assert stored < sum(a.nbytes for a in weights.values())
    assert "bn1" not in str(sorted(weights)) and "conv1.bias" in weights  # folded


def test_check_imports_no_torch(tmp_path):
    _digits(tmp_path, "{l1: 64, l2: 100, flash: 200}")
    probe = ("import sys\n"
             "import edgebuild.cli\n"
             "code = edgebuild.cli.main(['check'])\n"
             "print(code, 'torch' in sys.modules, 'edgebuild.memory.budget' in sys.modules)\n")
    result = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True,
                            text=True, timeout=120)
    assert result.stdout.split() == ["2", "False", "True"], result.stderr
    assert "target.memory.l1" in result.stderr and "target.memory.flash" in result.stderr


# ---- the planner's own functions: no second estimate -------------------------------------

def _folded(manifest: Manifest) -> tuple[tuple[int, ...], tuple]:
    layers, _ = folding.fold_layers(manifest.model.layers)
    return tuple(manifest.model.input), layers


def _example(path: Path) -> Manifest:
    """A single-target example manifest."""
    return Manifest.model_validate(yaml.safe_load(path.read_text()))


TARGETS = example_targets()  # every example, once per target


TINY = Manifest.model_validate({  # a layer smaller whole than two slots of its smallest tile
    "name": "tiny", "dataset": {"format": "sklearn-digits"},
    "model": {"input": [4], "layers": [{"name": "fc", "op": "linear", "out": 1}]}})


def _windows(manifest: Manifest) -> list[tiling.Window]:
    shape, layers = _folded(manifest)
    graph, _ = graphs.build(shape, layers)
    nodes = {node.name: node for node in graph.nodes}
    return [w for layer in layers for _, w in OPS[layer.op].windows(
        layer, nodes[layer.name].in_shapes, nodes[layer.name].out_shape)]


@pytest.mark.parametrize("double_buffer", [True, False])
def test_minimum_l1_is_where_the_tiler_starts_finding_a_tile(double_buffer):
    windows = [w for _, manifest in TARGETS for w in _windows(manifest)] + _windows(TINY)
    assert any(tiling.whole(w) < tiling.smallest_l1(w, True) for w in windows)
    for w in windows:
        need = tiling.minimum_l1(w, double_buffer)
        assert tiling.choose("x", w, need, double_buffer) is not None
        assert tiling.choose("x", w, need - 1, double_buffer) is None


@pytest.mark.parametrize("manifest", [*(m for _, m in TARGETS), TINY],
                         ids=[*(name for name, _ in TARGETS), "tiny"])
def test_each_need_is_exactly_what_the_planner_needs(manifest):
    shape, layers = _folded(manifest)
    double = manifest.target.tiling.double_buffer
    plan = make_plan(shape, layers, 0)
    needs = budget.needs(shape, layers, plan, double)
    _, problems = tile_steps(shape, layers, plan, needs_l1(needs), 1 << 30, double)
    assert not problems
    _, problems = tile_steps(shape, layers, plan, needs_l1(needs) - 1, 1 << 30, double)
    assert problems
    assert needs.ram.bytes == plan.arena_bytes + plan.state_bytes
    exact = manifest.target.memory.model_copy(update={
        "l1": needs_l1(needs), "l2": needs.ram.bytes, "flash": needs.flash_bytes})
    assert budget.shortfalls(needs, exact) == []
    for field in ("l1", "l2", "flash"):
        below = exact.model_copy(update={field: getattr(exact, field) - 1})
        assert [path[-1] for path, _ in budget.shortfalls(needs, below)] == [field]


def needs_l1(needs: budget.Needs) -> int:
    return max(p.bytes for p in needs.l1)


def test_a_layer_running_whole_is_described_so():
    memory = TINY.target.memory.model_copy(update={"l1": 12})
    problems = budget.problems(
        TINY.model_copy(update={"target": TINY.target.model_copy(update={"memory": memory})}),
        _folded(TINY)[1])
    # 4 inputs + 4 weights + an int32 bias + 1 output = 13 bytes, less than two slots of 16
    assert problems == [(("target", "memory", "l1"), (
        "12 B is too small: layer fc needs at least 13 bytes (it runs whole: input 4, "
        "weights 4, bias 4, output 1; any tile needs more)"))]


def test_imported_weights_weigh_what_check_weighs():
    """Pre-quantized weights (mnist_extrasmall) as the quantize stage stores them."""
    from edgebuild.pipeline.stages import quantize
    from edgebuild.targets import numbers

    path = REPO / "manifests" / "mnist_extrasmall.yaml"
    manifest = _example(path)
    shape, layers = _folded(manifest)
    stored, _ = quantize.imported_layers(
        layers, arrays.load(path.parent / manifest.model.weights),
        numbers.device_numbers(manifest.target.device.value))
    assert sum(a.nbytes for a in stored.values()) == \
        sum(w.bytes for w in budget.layer_weights(shape, layers))


def test_buffer_state_counts_against_l2():
    manifest = _example(REPO / "manifests" / "motions_stream.yaml")
    shape, layers = _folded(manifest)
    plan = make_plan(shape, layers, 0)
    needs = budget.needs(shape, layers, plan, True)
    assert plan.state_bytes > 0 and needs.ram.bytes == plan.arena_bytes + plan.state_bytes
    small = manifest.target.memory.model_copy(update={"l2": needs.ram.bytes - 1})
    [(path, message)] = budget.shortfalls(needs, small)
    assert path == ("target", "memory", "l2")
    assert f"with its buffer state needs at least {needs.ram.bytes} bytes" in message
