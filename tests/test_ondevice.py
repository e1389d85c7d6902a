"""On-device training (issue 7): bad `ondevice` input, budget selection, the backward graph
and its generated C, C vs PyTorch step by step, tiled and branching gradients (with the
classic bugs injected into the generated C to show the comparison catches them), the
weight-only file on the device, reproducibility, and the two examples.

Two tiny models (generated `npz` data, 2-3 epochs) are built once per module and shared:
- `seq`: conv1d with a residual block (conv2 feeds conv3 and the add `res`), a conv1d
  with a fused max pool, and target.memory.l1 = 1 KiB so the weight gradients are tiled;
- `img`: conv2d, a depthwise conv2d (groups = channels), avg pooling (standalone and
  fused) and a concat, with l1 = 1 KiB so that the depthwise and linear layers run in
  channel tiles and the pools in tiles per sample.
Variants edit only the `ondevice` section and build against the shared cache, so training
and QAT are restored, never rerun.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

try:  # tests/ as a package (tests/__init__.py) or as plain rootdir modules
    from tests.conftest import run_cli
except ImportError:
    from conftest import run_cli

from edgebuild.manifest import Manifest
from edgebuild.manifest.ondevice import AUTO_LEARNING_RATES, Ondevice
from edgebuild.model import folding
from edgebuild.ondevice import backward, finetune, lifetime, wof
from edgebuild.ondevice import memory as training_memory
from edgebuild.ondevice import trainable as ondevice
from edgebuild.pipeline.stages import ondevice_kat

HAS_M4 = bool(shutil.which("arm-none-eabi-gcc") and shutil.which("qemu-system-arm"))
TRAINED = {"restored", "uptodate"}  # a stage that did not run again

# What both test models share: short training, a Cortex-M4 target, the ondevice section.
TRAINING = """\
train: {epochs: 3, batch: 16, optimizer: {adam: {lr: 0.01}}}
qat: {epochs: 1, batch: 16}
target:
  device: cortex-m4
  memory: {l1: @L1@, l2: 64KiB, flash: 256KiB}
ondevice:
@ONDEVICE@
"""

SEQ = """\
name: seq
seed: 2
dataset: {format: npz, path: seq.npz}
model:
  input: [3, 16]
  layers:
    - {name: conv1, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu}
    - {name: conv2, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu}
    - {name: conv3, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu}
    - {name: res, op: add, inputs: [conv2, conv3], act: relu}
    - {name: conv4, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu, pool: {mode: max, size: 2}}
    - {name: fc, op: linear, out: 3, flatten: true, wide: true}
""" + TRAINING.replace("@L1@", "1KiB")
SEQ_ONDEVICE = """\
  trainable: [conv2, conv3, conv4, fc]
  optimizer: {sgd: {lr: 0.05, momentum: 0.9}}
  batch: 4
  steps: 3
  epochs: 1
"""

IMG = """\
name: img
seed: 2
dataset: {format: npz, path: img.npz}
model:
  input: [2, 6, 6]
  layers:
    - {name: conv1, op: conv2d, out: 4, kernel: 3, pad: 1, act: relu}
    - {name: dw, op: conv2d, out: 4, kernel: 3, pad: 1, groups: 4, act: relu}
    - {name: pool, op: pool2d, mode: avg, size: 2}
    - {name: side, op: conv2d, out: 4, kernel: 1, inputs: [conv1], pool: {mode: avg, size: 2}, act: abs}
    - {name: cat, op: concat, inputs: [pool, side]}
    - {name: fc, op: linear, out: 3, flatten: true, wide: true}
""" + TRAINING.replace("@L1@", "1KiB")
IMG_ONDEVICE = """\
  trainable: [dw, side, fc]
  optimizer: {sgd: {lr: 0.05}}
  batch: 4
  steps: 3
  epochs: 1
"""

MODELS = {"seq": (SEQ, SEQ_ONDEVICE, (3, 16)), "img": (IMG, IMG_ONDEVICE, (2, 6, 6))}


# ---- helpers ----------------------------------------------------------------------------

def manifest_text(model: str, ondevice_section: str | None = None, *edits) -> str:
    template, default, _ = MODELS[model]
    text = template.replace("@ONDEVICE@\n", ondevice_section or default)
    for old, new in edits:
        assert old in text, f"edit {old!r} does not apply"
        text = text.replace(old, new, 1)
    return text


def write_npz(path: Path, shape: tuple[int, ...], seed: int) -> None:
    """Three classes: a per-class template plus noise (learnable, tiny)."""
    rng = np.random.default_rng(seed)
    templates = rng.normal(size=(3, *shape))

    def split(n):
        y = np.arange(n) % 3
        return (templates[y] + 0.6 * rng.normal(size=(n, *shape))).astype(np.float32), y

    x_train, y_train = split(72)
    x_test, y_test = split(30)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez(path, x_train=x_train, y_train=y_train, x_test=x_test, y_test=y_test)


def project(root: Path, model: str, text: str | None = None) -> Path:
    write_npz(root / "manifests" / f"{model}.npz", MODELS[model][2], seed=len(model))
    (root / "manifests" / f"{model}.yaml").write_text(text or manifest_text(model))
    return root


def build(root: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    result = run_cli(["build", "--json", *extra], root, timeout=900)
    assert "Traceback" not in result.stderr, result.stderr
    outcome = json.loads(result.stdout)["manifests"] if result.stdout.strip() else {}
    return result, outcome


def statuses(outcome: dict, name: str) -> dict[str, str]:
    return {stage: value["status"] for stage, value in outcome[name].items()}


def out(root: Path, name: str) -> Path:
    return root / "build" / name


def read_json(path: Path):
    return json.loads(path.read_text())


def memory_layers(built: Path) -> list[str]:
    """The layers the build trains (memory.json `trainable`)."""
    return read_json(built / "ondevice" / "memory.json")["trainable"]


def layout_of(built: Path) -> tuple[list[tuple[str, tuple[int, ...]]], int]:
    data = read_json(built / "ondevice" / "layout.json")
    return [(n, tuple(s)) for n, s in data["tensors"]], data["layout_id"]


def folded_layers(text: str):
    import yaml

    manifest = Manifest.model_validate(yaml.safe_load(text))
    return manifest, folding.fold_layers(manifest.model.layers)[0]


def variant(base: Path, model: str, ondevice_section: str, where: Path,
            extra_files: dict[str, bytes] | None = None) -> tuple[Path, dict]:
    """`model` with another `ondevice` section, built in `where` against `base`'s cache."""
    project(where, model, manifest_text(model, ondevice_section))
    for name, data in (extra_files or {}).items():
        (where / "manifests" / name).write_bytes(data)
    result, outcome = build(where, "--cache-dir", str(base / "cache"))
    assert result.returncode == 0, result.stderr[-4000:]
    return where, outcome


@pytest.fixture(scope="module")
def seq_project(tmp_path_factory) -> Path:
    root = project(tmp_path_factory.mktemp("seq"), "seq")
    result, outcome = build(root)
    assert result.returncode == 0, result.stderr[-4000:]
    assert set(statuses(outcome, "seq").values()) == {"built"}
    return root


@pytest.fixture(scope="module")
def img_project(tmp_path_factory) -> Path:
    root = project(tmp_path_factory.mktemp("img"), "img")
    result, outcome = build(root)
    assert result.returncode == 0, result.stderr[-4000:]
    assert set(statuses(outcome, "img").values()) == {"built"}
    return root


# ---- 1. bad input: exit 2, the field and what is allowed or needed, nothing built -------

OPT = "optimizer: {sgd: {lr: 0.05, momentum: 0.9}}"
TRAINABLE = "trainable: [conv2, conv3, conv4, fc]"
SUPPORTED = "supported: sgd with lr and momentum; adam with lr, betas, eps"


def bad_cases(memory: dict, layout, layout_id: int) -> dict[str, tuple[str, dict, str, list]]:
    """name -> (manifest text, extra files, field, message fragments)."""
    smallest = memory["choices"][0]
    assert smallest["layers"] == ["fc"]
    need, full = smallest["ram"], memory["l2_bytes"] - memory["arena"]
    good = wof.encode([np.full(math.prod(s), 0.25, np.float32) for _, s in layout], layout_id)
    version = bytearray(good)
    version[4:6] = (2).to_bytes(2, "little")
    other = wof.encode([np.zeros(math.prod(s), np.float32) for _, s in layout],
                       wof.layout_id([("other.weight", (8, 8, 3, 1))]))

    def case(edits, field, fragments, files=None):
        return edits, files or {}, field, fragments

    weights = TRAINABLE + "\n  weights: @NAME@.wof"
    raw = {
        "unknown_layer": case([(TRAINABLE, "trainable: [conv3, nope]")], "ondevice.trainable[1]",
                              ["no layer named 'nope'",
                               "layers with weights: conv1, conv2, conv3, conv4, fc"]),
        "last_too_many": case([(TRAINABLE, "trainable: {last: 6}")], "ondevice.trainable",
                              ["last: 6", "only 5 layers with weights",
                               "conv1, conv2, conv3, conv4, fc"]),
        "budget_too_small": case([(TRAINABLE, f"trainable: {{budget: {need - 1}}}")],
                                 "ondevice.trainable",
                                 [f"budget {need - 1} bytes is too small for even the last "
                                  f"layer", f"training fc needs {need} bytes"]),
        "adamw": case([(OPT, "optimizer: {adamw: {lr: 0.01}}")], "ondevice.optimizer.adamw",
                      ["adamw is not supported on the device", SUPPORTED]),
        "sgd_nesterov": case([(OPT, "optimizer: {sgd: {lr: 0.05, momentum: 0.9, "
                                    "nesterov: true}}")],
                             "ondevice.optimizer.sgd.nesterov",
                             ["nesterov is not supported on the device", SUPPORTED]),
        "adam_amsgrad": case([(OPT, "optimizer: {adam: {lr: 0.01, amsgrad: true}}")],
                             "ondevice.optimizer.adam.amsgrad",
                             ["amsgrad is not supported on the device", SUPPORTED]),
        "sgd_weight_decay": case([(OPT, "optimizer: {sgd: {lr: 0.05, weight_decay: 0.01}}")],
                                 "ondevice.optimizer.sgd.weight_decay",
                                 ["weight_decay is not supported on the device", SUPPORTED]),
        "adam_weight_decay": case([(OPT, "optimizer: {adam: {weight_decay: 0.01}}")],
                                  "ondevice.optimizer.adam.weight_decay",
                                  ["weight_decay is not supported on the device", SUPPORTED]),
        "scope_unknown": case([(TRAINABLE, TRAINABLE + "\n  scope: {convx: bias}")],
                              "ondevice.scope.convx",
                              ["no layer named 'convx'",
                               "layers with weights: conv1, conv2, conv3, conv4, fc"]),
        "scope_bias_without_bias": case(
            [("{name: conv3, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu}",
              "{name: conv3, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu, bias: false}"),
             (TRAINABLE, TRAINABLE + "\n  scope: {conv3: bias}")],
            "ondevice.scope.conv3",
            ["'conv3' has no bias (bias: false)", "`bias` leaves nothing to train", "use all"]),
        "scope_not_trained": case([(TRAINABLE, "trainable: [conv4, fc]\n  scope: {conv2: bias}")],
                                  "ondevice.scope.conv2",
                                  ["'conv2' is not trained (trainable: conv4, fc)"]),
        "cross_entropy_after_relu": case(
            [("{name: fc, op: linear, out: 3, flatten: true, wide: true}",
              "{name: fc, op: linear, out: 3, flatten: true, act: relu}")],
            "ondevice.loss", ["cross_entropy needs raw class scores", "'fc' applies relu",
                              "use `act: none` on it or loss: mse"]),
        "over_l2": case([("l2: 64KiB", f"l2: {full - 1}")], "ondevice.trainable",
                        [f"training conv2, conv3, conv4, fc needs {full} bytes of L2 RAM besides "
                         "the",
                         f"but target.memory.l2 is {full - 1}", f"training only fc needs {need} + "]),
        # fc's smallest forward tile: one sample's 32 inputs, one row of 32 weights, a bias
        # and an output, 4 x 66 bytes
        "l1_too_small": case([("l1: 1KiB", "l1: 200")], "target.memory.l1",
                             ["layer 'fc': its forward pass needs 264 bytes of L1 for its "
                              "smallest tile (1 output row of 1 channel)",
                              "more than target.memory.l1 = 200", "raise target.memory.l1"]),
        "wof_magic": case([(TRAINABLE, weights)], "ondevice.weights",
                          ["magic is 58 42 57 46", "expected 45 42 57 46 (EBWF)",
                           "not an edgebuild weight file"],
                          {"wof": b"XBWF" + good[4:]}),
        "wof_version": case([(TRAINABLE, weights)], "ondevice.weights",
                            ["version is 2, this edgebuild reads version 1"],
                            {"wof": bytes(version)}),
        "wof_truncated": case([(TRAINABLE, weights)], "ondevice.weights",
                              [f"size field is {len(good)} bytes, the file is "
                               f"{len(good) - 8} bytes (truncated or padded)"],
                              {"wof": good[:-8]}),
        "wof_other_model": case([(TRAINABLE, weights)], "ondevice.weights",
                                ["layout id is", "another model's tensor list"],
                                {"wof": other}),
    }
    found = {}
    for name, (edits, files, field, fragments) in raw.items():
        text = manifest_text("seq", None, *edits).replace("name: seq", f"name: {name}")
        if files:  # the message names the file as the manifest gives it
            fragments = [f"{name}.wof: {fragments[0]}", *fragments[1:]]
        found[name] = (text.replace("@NAME@", name),
                       {f"{name}.wof": data for data in files.values()}, field, fragments)
    return found


@pytest.fixture(scope="module")
def bad_run(seq_project, tmp_path_factory):
    """One `edgebuild build` over a project holding one broken manifest per case."""
    built = out(seq_project, "seq")
    cases = bad_cases(read_json(built / "ondevice" / "memory.json"), *layout_of(built))
    root = tmp_path_factory.mktemp("bad")
    (root / "manifests").mkdir()
    shutil.copy(seq_project / "manifests" / "seq.npz", root / "manifests" / "seq.npz")
    for name, (text, files, _, _) in cases.items():
        (root / "manifests" / f"{name}.yaml").write_text(text)
        for file_name, data in files.items():
            (root / "manifests" / file_name).write_bytes(data)
    result = run_cli(["build"], root, timeout=300)
    return root, result, cases


BAD_CASES = ["unknown_layer", "last_too_many", "budget_too_small", "adamw", "sgd_nesterov",
             "adam_amsgrad", "sgd_weight_decay", "adam_weight_decay", "scope_unknown",
             "scope_bias_without_bias", "scope_not_trained", "cross_entropy_after_relu", "over_l2",
             "l1_too_small", "wof_magic",
             "wof_version", "wof_truncated", "wof_other_model"]


def test_bad_input_builds_nothing(bad_run):
    root, result, cases = bad_run
    assert sorted(cases) == sorted(BAD_CASES)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert not (root / "build").exists() or not any((root / "build").iterdir())
    assert not (root / "cache").exists() or not list((root / "cache").rglob("meta.json"))


@pytest.mark.parametrize("name", BAD_CASES)
def test_bad_input_names_the_field_and_what_is_allowed(bad_run, name):
    _, result, cases = bad_run
    _, _, field, fragments = cases[name]
    found = [line for line in result.stderr.splitlines()
             if line.startswith(f"manifests/{name}.yaml:")]
    assert len(found) == 1, result.stderr  # exactly this one problem, nothing else
    line = found[0]
    assert re.match(rf"manifests/{name}\.yaml:\d+:\d+: ", line), line
    fields = field if isinstance(field, tuple) else (field,)
    assert any(f": {f}: " in line for f in fields), (fields, line)
    for fragment in fragments:
        assert fragment in line, (fragment, line)


def test_budget_message_states_what_the_smallest_choice_needs(seq_project, bad_run):
    """The number in the message is the memory of training only the last layer, as a
    successful build reports it (memory.json choices[0])."""
    memory = read_json(out(seq_project, "seq") / "ondevice" / "memory.json")
    _, result, _ = bad_run
    line = next(line for line in result.stderr.splitlines() if "budget_too_small" in line)
    needs = int(re.search(r"training fc needs (\d+) bytes", line).group(1))
    assert needs == memory["choices"][0]["ram"]
    assert memory["choices"][0]["layers"] == ["fc"]


def test_check_refuses_training_plus_arena_over_l2(seq_project, tmp_path):
    memory = read_json(out(seq_project, "seq") / "ondevice" / "memory.json")
    l2 = memory["l2_bytes"] - 1
    assert memory["ram"] - memory["by_kind"].get("l1", 0) <= l2
    project(tmp_path, "seq", manifest_text("seq", None, ("l2: 64KiB", f"l2: {l2}")))
    result = run_cli(["check"], tmp_path, timeout=120)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "target.memory.l2" in result.stderr


# ---- 2. budget selection ----------------------------------------------------------------

@cache
def seq_layers():
    return folded_layers(manifest_text("seq"))


def weighted_suffix(layers, count: int) -> tuple[str, ...]:
    names = [layer.name for layer in layers if layer.op in ("conv1d", "conv2d", "linear")]
    return tuple(names[len(names) - count:])


def spec_for(trainable, optimizer: dict, loss: str, batch: int, scope=None) -> Ondevice:
    return Ondevice.model_validate({"trainable": trainable, "optimizer": optimizer,
                                    "loss": loss, "batch": batch, "scope": scope or {}})


OPTIMIZERS = [{"sgd": {"lr": 0.05}}, {"sgd": {"lr": 0.05, "momentum": 0.9}},
              {"adam": {"lr": 0.01}}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=st.integers(1, 60_000), batch=st.integers(1, 8),
       optimizer=st.sampled_from(OPTIMIZERS), loss=st.sampled_from(["cross_entropy", "mse"]),
       bias_only_conv2=st.booleans())
def test_budget_picks_the_largest_last_n_that_fits(budget, batch, optimizer, loss,
                                                   bias_only_conv2):
    manifest, layers = seq_layers()
    scope = {"conv2": "bias"} if bias_only_conv2 else {}
    shape, l1 = tuple(manifest.model.input), manifest.target.memory.l1
    spec = spec_for({"budget": budget}, optimizer, loss, batch, scope)
    chosen = ondevice.settings(spec, l1)
    table = training_memory.choices(layers, shape, scope, chosen)
    rams = [choice.ram for choice in table]
    assert [c.layers for c in table] == [weighted_suffix(layers, n) for n in range(1, 6)]
    assert rams == sorted(set(rams))  # more layers, strictly more memory
    if budget < rams[0]:
        with pytest.raises(training_memory.SelectionError, match=rf"needs {rams[0]} bytes"):
            ondevice.resolve(spec, layers, shape, l1)
        return
    resolved = ondevice.resolve(spec, layers, shape, l1)
    count = len(resolved.names)
    assert resolved.names == weighted_suffix(layers, count)
    assert resolved.memory["ram"] <= budget
    assert resolved.memory["ram"] == rams[count - 1]
    # the memory of the chosen set, evaluated on its own, is the same
    _, alone = training_memory.evaluate(layers, shape, resolved.names, scope, chosen)
    assert alone["ram"] == resolved.memory["ram"]
    if count < len(rams):  # one more layer would not fit
        _, bigger = training_memory.evaluate(layers, shape, weighted_suffix(layers, count + 1),
                                             scope, chosen)
        assert bigger["ram"] > budget


def test_training_only_the_last_layer_needs_what_its_buffers_need():
    """An independent count for `fc` alone (batch 4, SGD momentum): saved conv4 output and
    logits, the logits' gradient, weights + gradients + momentum, the int8 batch and its
    int32 labels."""
    manifest, layers = seq_layers()
    spec = spec_for(["fc"], {"sgd": {"lr": 0.05, "momentum": 0.9}}, "cross_entropy", 4)
    resolved = ondevice.resolve(spec, layers, (3, 16), manifest.target.memory.l1)
    floats = 4 * 32 + 4 * 3 + 4 * 3 + 3 * (3 * 32 + 3)
    assert resolved.memory["ram"] == 4 * floats + 4 * 3 * 16 + 4 * 4
    assert resolved.choices[0].ram == resolved.memory["ram"]


def c_static_bytes(c_text: str) -> int:
    return 4 * sum(int(n) for n in re.findall(r"^static float \w+\[(\d+)\];", c_text, re.M))


def test_memory_per_choice_is_reported_and_is_what_the_c_allocates(seq_project):
    built = out(seq_project, "seq")
    memory = read_json(built / "ondevice" / "memory.json")
    manifest, layers = seq_layers()
    spec = manifest.ondevice
    table = training_memory.choices(layers, (3, 16), {}, ondevice.settings(spec, 1024))
    assert memory["choices"] == [{"layers": list(c.layers), "ram": c.ram} for c in table]
    assert memory["trainable"] == ["conv2", "conv3", "conv4", "fc"]
    assert {"layers": memory["trainable"], "ram": memory["ram"]} in memory["choices"]
    assert sum(memory["by_kind"].values()) == memory["ram"] + memory["flash"]
    # the estimate is what the generated code declares: float buffers plus the int8 batch
    # and its labels
    c_text = (built / "ondevice" / "train" / "train_model.c").read_text()
    assert c_static_bytes(c_text) + 4 * 3 * 16 + 4 * 4 == memory["ram"]
    assert memory["by_kind"]["batch"] == 4 * 3 * 16 + 4 * 4


# ---- 3. backward graph: a tensor with two consumers, gradients zeroed once ---------------

def seq_graph(scopes: dict[str, str]) -> backward.TrainGraph:
    _, layers = seq_layers()
    return backward.build(layers, (3, 16), scopes, 4, 1024)


@pytest.mark.parametrize("model, scopes, input_shape", [
    ("seq", {"conv2": "all", "conv3": "all", "conv4": "all", "fc": "all"}, (3, 16)),
    ("seq", {"conv3": "bias", "fc": "all"}, (3, 16)),
    ("img", {"dw": "all", "side": "all", "fc": "all"}, (2, 6, 6))])
@pytest.mark.parametrize("loss", ["cross_entropy", "mse"])
def test_l2_lower_bound_follows_the_buffers_lifetimes(model, scopes, input_shape, loss):
    """The events name exactly the buffers the code declares (but the persistent ones and
    L1), so none is left out of the bound; the bound lies between the busiest single event
    and everything held for the whole step."""
    _, layers = folded_layers(manifest_text(model))
    graph = backward.build(layers, input_shape, scopes, 4, 1024)
    found = training_memory.buffers(graph, 4, 1, math.prod(input_shape), loss)
    events = lifetime.events(graph, loss == "mse")
    named = set().union(*events) - {lifetime.ARENA}
    assert named == {b.name for b in found
                     if not lifetime.persistent(b) and b.kind not in ("frozen", "l1")}
    size = {b.name: b.bytes for b in found} | {lifetime.ARENA: 1000}
    always = sum(b.bytes for b in found if lifetime.persistent(b))
    bound = lifetime.lower_bound(graph, found, 1000, loss == "mse")
    everything = sum(b.bytes for b in found if b.kind not in ("frozen", "l1")) + 1000
    assert always + max(sum(size[n] for n in e) for e in events) <= bound < everything


def test_l2_lower_bound_by_hand():
    """fc alone (32 inputs -> 3, batch 4, SGD without momentum): the prefix holds the arena
    and the boundary tensor; then the logits, their gradient and the weight gradient."""
    _, layers = seq_layers()
    graph = backward.build(layers, (3, 16), {"fc": "all"}, 4, 1024)
    found = training_memory.buffers(graph, 4, 0, 48, "cross_entropy")
    size = {b.name: b.bytes for b in found}
    batch = size["batch_inputs"] + size["batch_labels"]
    weights = size["p_fc.weight"] + size["p_fc.bias"]
    # the busiest event: the weight gradient reads x_conv4 and d_fc while g_fc.weight is
    # written and g_fc.bias (written later) is not yet needed; x_fc is dead by then
    busiest = size["x_conv4"] + size["d_fc"] + size["g_fc.weight"]
    prefix = 5000 + size["x_conv4"]
    assert lifetime.lower_bound(graph, found, 5000, False) == batch + weights + max(busiest,
                                                                                    prefix)


def writers(steps: list[dict], tensor: str) -> list[dict]:
    """The contributions to d:tensor: every step writing it but the tensor's own layer's
    activation run in place, which masks the sum of the others (eb_train.h)."""
    return [step for step in steps
            if step["output"] == f"d:{tensor}" and step.get("layer") != tensor]


def masking(steps: list[dict], layer: str) -> dict:
    """The in-place activation step of `layer`: it reads d:layer once every contribution
    is in."""
    return next(step for step in steps
                if step["output"] == f"d:{layer}" and step.get("layer") == layer)


@pytest.mark.parametrize("conv2_scope", ["all", "bias"])
def test_a_tensor_feeding_two_layers_sums_both_gradients(conv2_scope):
    graph = seq_graph({"conv2": conv2_scope, "conv3": "all", "conv4": "all", "fc": "all"})
    steps = [step.to_json() for step in backward.backward_steps(graph)]
    into = writers(steps, "conv2")
    assert sorted((s["op"], s["layer"]) for s in into) == [("add_grad", "res"),
                                                          ("input_grad", "conv3")]
    # both run before conv2's own backward (its activation, in place) reads d:conv2
    reader = steps.index(masking(steps, "conv2"))
    assert all(steps.index(s) < reader for s in into)


@pytest.mark.parametrize("model", ["seq", "img"])
def test_every_gradient_gets_one_contribution_per_consumer(model):
    """d:t is written once per read of t by a float-part layer (the sum rule), once for a
    pre-activation (its activation) or a pooled input (its conv), plus once by the loss for
    the output; and every write comes before the first read of d:t."""
    manifest, layers = folded_layers(manifest_text(model))
    graph = ondevice.resolve(manifest.ondevice, layers, tuple(manifest.model.input),
                             manifest.target.memory.l1).graph
    steps = [step.to_json() for step in backward.backward_steps(graph)]
    assert graph.needs_grad
    for tensor in graph.needs_grad:
        if tensor.endswith((".pre", ".pooled")):
            expected = 1
        else:
            expected = sum(layer.inputs.count(tensor) for layer in graph.layers)
        expected += tensor == graph.output
        assert len(writers(steps, tensor)) == expected, (tensor, writers(steps, tensor))
    for index, step in enumerate(steps):
        for read in step.get("reads", []):
            if read.startswith("d:"):
                assert all(steps.index(w) < index for w in writers(steps, read[2:])), step


def test_backward_json_is_the_backward_graph(seq_project):
    built = out(seq_project, "seq")
    data = read_json(built / "ondevice" / "backward.json")
    graph = seq_graph({"conv2": "all", "conv3": "all", "conv4": "all", "fc": "all"})
    assert data["backward"] == [step.to_json() for step in backward.backward_steps(graph)]
    assert len(writers(data["backward"], "conv2")) == 2
    assert data["frozen"] == ["conv1"] and data["boundary"] == [["conv1", 64]]


def test_concat_of_one_tensor_twice_routes_both_halves_of_the_gradient():
    from edgebuild.ondevice import codegen as traincode

    text = manifest_text("seq").replace(
        "    - {name: conv3, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu}\n"
        "    - {name: res, op: add, inputs: [conv2, conv3], act: relu}\n"
        "    - {name: conv4, op: conv1d, out: 4, kernel: 3, pad: 1, act: relu, pool: {mode: max, "
        "size: 2}}\n", "    - {name: cat, op: concat, inputs: [conv2, conv2]}\n")
    _, layers = folded_layers(text)
    assert [layer.name for layer in layers] == ["conv1", "conv2", "cat", "fc"]
    graph = backward.build(layers, (3, 16), {"conv2": "all", "fc": "all"}, 4, 16384)
    spec = traincode.TrainSpec(
        name="dup", graph=graph, buffers=[], params={}, optimizer="sgd", hyper={},
        loss="cross_entropy", batch=4, inputs=np.zeros((1, 4, 48), np.int8),
        labels=np.zeros((1, 4), np.int64), offsets={}, layout_id=0, input_size=48)
    calls = [c for c in traincode.backward_calls(spec) if "d_cat" in c and "d_conv2" in c]
    assert len(calls) == 2
    offsets = sorted(int(re.search(r"d_cat \+ s \* 128 \+ (\d+)", c).group(1)) for c in calls)
    assert offsets == [0, 64]


def strip_comments(c_text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", c_text, flags=re.S)


FUNCTION = re.compile(r"^[A-Za-z_][\w \t\*]*?\b(\w+)\s*\(([^;{}]*)\)\s*\{", re.M)


def functions(c_text: str) -> dict[str, tuple[int, int]]:
    """Top-level function name -> (start, end) of its body: headers found at the start of
    a line, bodies by brace matching (comments stripped first)."""
    found, index = {}, 0
    while (match := FUNCTION.search(c_text, index)) is not None:
        depth, position = 1, match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(c_text[position], 0)
            position += 1
        found[match.group(1)] = (match.end(), position - 1)
        index = position
    return found


BACKWARD_CALL = re.compile(r"\b(ebt_\w*backward\w*|ebt_accumulate|ebt_softmax_cross_entropy|"
                           r"ebt_mse)\s*\(")


def check_zeroed_once(c_text: str) -> list[str]:
    code = strip_comments(c_text)
    buffers = re.findall(r"^static float ([dg]_\w+)\[\d+\];", code, re.M)
    assert buffers, "no gradient buffers declared"
    bodies = functions(code)
    start, end = next(span for name, span in bodies.items() if name.endswith("_train_step"))
    first_backward = BACKWARD_CALL.search(code, start, end)
    assert first_backward, "train_step has no backward call"
    for name in buffers:
        zeroing = [m.start() for m in re.finditer(rf"\b(?:memset|ebt_zero)\s*\(\s*{name}\s*,",
                                                  code)]
        if name.endswith("__pre"):  # a pre-activation's: its activation writes it, once
            writes = [m.start() for m in re.finditer(
                rf"\bebt_act_backward\([^;]*,\s*{name}\s*\);", code)]
            assert not zeroing and len(writes) == 1, (name, len(zeroing), len(writes))
            first_use = re.search(rf"\b{name}\b", code[first_backward.start():end])
            assert first_use and first_backward.start() + first_use.start() > writes[0], name
            continue
        assert len(zeroing) == 1, (name, len(zeroing))
        assert start < zeroing[0] < first_backward.start(), name
        # nothing else resets it: no element stores of 0, no other memset/copy into it
        assert not re.search(rf"\b{name}\s*\[[^\]]*\]\s*=[^=]", code), name
        assert not re.search(rf"\bmem(?:cpy|move)\s*\(\s*{name}\s*,", code), name
    # every gradient buffer a backward kernel writes was declared (and so zeroed)
    used = set(re.findall(r"\b([dg]_\w+)\b", code[first_backward.start():end]))
    assert used <= set(buffers), used - set(buffers)
    return buffers


@pytest.mark.parametrize("model", ["seq", "img"])
def test_generated_c_zeroes_each_gradient_exactly_once_per_step(model, request):
    root = request.getfixturevalue(f"{model}_project")
    c_text = (out(root, model) / "ondevice" / "train" / "train_model.c").read_text()
    buffers = check_zeroed_once(c_text)
    graph = read_json(out(root, model) / "ondevice" / "backward.json")
    expected = {("d_" if not n.endswith((".weight", ".bias")) else "g_")
                + n[2:].replace(".", "__") for n in graph["zero_once_per_step"]}
    written = {name for name in buffers if name.endswith("__pre")}
    assert set(buffers) - written == expected
    assert bool(written) == (model == "img")  # side's abs keeps its pre-activation


def test_the_zeroing_check_catches_a_second_memset(seq_project):
    """The parser above is not vacuous: a memset inside a tile loop is found."""
    c_text = (out(seq_project, "seq") / "ondevice" / "train" / "train_model.c").read_text()
    bad = re.sub(r"^(\s*)(ebt_conv_backward_weight(_tiled)?\(&K_conv3,)",
                 r"\1memset(g_conv3__weight, 0, sizeof g_conv3__weight);\n\1\2", c_text,
                 count=1, flags=re.M)
    assert bad != c_text
    with pytest.raises(AssertionError):
        check_zeroed_once(bad)


# ---- 4. C vs PyTorch ----------------------------------------------------------------------

def start_values(layout, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(0.2 * rng.standard_normal(math.prod(s))).astype(np.float32) for _, s in layout]


VARIANTS = {
    # name: (model, ondevice section or None = the shared build as is)
    "img-ce-sgd": ("img", None),
    "seq-ce-sgd-momentum": ("seq", None),
    "img-mse-adam": ("img", "  trainable: [dw, side, fc]\n  loss: mse\n"
                            "  optimizer: {adam: {lr: 0.01}}\n  batch: 4\n  steps: 4\n"
                            "  epochs: 1\n"),
    "seq-mse-sgd-from-wof": ("seq", "  trainable: [conv2, conv3, conv4, fc]\n  loss: mse\n"
                                    "  optimizer: {sgd: {lr: 0.1}}\n  batch: 3\n  steps: 3\n"
                                    "  epochs: 1\n  weights: start.wof\n"),
    "seq-ce-sgd-auto-lr": ("seq", "  trainable: [conv3, conv4, fc]\n  batch: 4\n  steps: 3\n"
                                  "  epochs: 1\n"),  # the default optimizer: sgd, lr auto
    "seq-ce-adam-budget": ("seq", "  trainable: {budget: @BUDGET@}\n"
                                  "  optimizer: {adam: {lr: 0.01, betas: [0.8, 0.99]}}\n"
                                  "  batch: 4\n  steps: 3\n  epochs: 1\n"),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_c_training_steps_match_pytorch(name, request, tmp_path):
    model, section = VARIANTS[name]
    base = request.getfixturevalue(f"{model}_project")
    root, files, budget_pick = base, {}, None
    if section is not None:
        layout, layout_id = layout_of(out(base, model))
        if "start.wof" in section:
            files["start.wof"] = wof.encode(start_values(layout, 7), layout_id)
        if "@BUDGET@" in section:
            _, layers = seq_layers()
            spec = spec_for(["fc"], {"adam": {"lr": 0.01}}, "cross_entropy", 4)
            table = training_memory.choices(layers, (3, 16), {}, ondevice.settings(spec, 1024))
            budget = (table[2].ram + table[3].ram) // 2
            section = section.replace("@BUDGET@", str(budget))
            budget_pick = table[2]
        root, outcome = variant(base, model, section, tmp_path, files)
        status = statuses(outcome, model)
        assert status["train"] in TRAINED and status["qat"] in TRAINED, status
        assert status["ondevice"] == "built" and status["ondevice_kat"] == "built", status
    built = out(root, model)
    manifest, _ = folded_layers((root / "manifests" / f"{model}.yaml").read_text())
    steps = manifest.ondevice.steps
    kat = read_json(built / "ondevice_kat" / "ondevice_kat.json")
    assert kat["steps"] == steps
    assert len(kat["loss_c"]) == len(kat["loss_torch"]) == steps
    assert all(math.isfinite(v) and v > 0 for v in kat["loss_c"] + kat["loss_torch"])
    assert kat["within_tolerance"] is True
    assert kat["grad_max_rel_diff"] < 1e-4 and kat["grad_check"] <= ondevice_kat.GRAD_TOLERANCE
    assert kat["weight_max_abs_diff"] < 1e-5
    assert kat["weight_check"] <= ondevice_kat.WEIGHT_TOLERANCE
    # not vacuous: every step has a loss, every trainable tensor a gradient, and moved
    assert min(kat["loss_torch"]) >= finetune.LOSS_FLOOR
    layout, _ = layout_of(built)
    trace = np.load(built / "ondevice" / "trace.npz")
    before = wof.read(built / "ondevice" / "weights.wof", layout)
    for step in range(steps):
        after = [trace[f"weight:{step}:{tensor}"] for tensor, _ in layout]
        for (tensor, _), start, end in zip(layout, before, after, strict=True):
            assert np.abs(trace[f"grad:{step}:{tensor}"]).max() >= finetune.GRADIENT_FLOOR
            assert np.abs(end - start).max() > 0, (step, tensor)
        before = after
    m4 = kat["cortex_m4"]
    if HAS_M4:
        assert m4["m4_within_tolerance"] is True and len(m4["losses"]) == steps
        assert m4["m4_grad_check"] <= ondevice_kat.GRAD_TOLERANCE
        assert m4["m4_weight_check"] <= ondevice_kat.WEIGHT_TOLERANCE
        # the step counted per stretch: every stretch segments.json names, in its order,
        # adding up to the step but for the call into it
        names = read_json(built / "ondevice" / "train" / "segments.json")
        counted = m4["segments"]
        assert [(c["layer"], c["phase"], c["macs"]) for c in counted] == \
            [(n["layer"], n["phase"], n["macs"]) for n in names]
        assert all(c["instructions"] > 0 and c["cycles"] >= c["instructions"] for c in counted)
        total = sum(c["instructions"] for c in counted)
        assert 0.99 * m4["instructions_per_step"] <= total <= m4["instructions_per_step"]
        trained = {layer for layer in manifest.ondevice.trainable} \
            if isinstance(manifest.ondevice.trainable, list) else set(memory_layers(built))
        weight_phases = {c["layer"] for c in counted if c["phase"] == "weight"}
        assert weight_phases == trained and m4["macs_per_step"] == sum(c["macs"] for c in counted)
        assert isinstance(kat["instructions_per_step"], int) and kat["instructions_per_step"] > 0
    else:
        assert "skipped" in m4 and kat["instructions_per_step"] is None
    report = read_json(built / "report.json")["metrics"]["ondevice"]
    assert report["steps"] == steps and report["loss_c"] == kat["loss_c"]
    tuned = read_json(built / "ondevice" / "finetune.json")
    if section is not None and "optimizer" not in section:  # lr auto: one of the grid's
        tried = tuned["learning_rates_tried"]
        assert sorted(float(lr) for lr in tried) == sorted(AUTO_LEARNING_RATES)
        assert tuned["learning_rate"] in AUTO_LEARNING_RATES
        assert tried[f"{tuned['learning_rate']:g}"] is not None
    else:
        assert tuned["learning_rates_tried"] is None
        assert tuned["learning_rate"] == manifest.ondevice.optimizer.settings.lr
    if files:  # the given starting weights are what both sides started from
        assert (built / "ondevice" / "weights.wof").read_bytes() == files["start.wof"]
    if budget_pick is not None:
        memory = read_json(built / "ondevice" / "memory.json")
        assert memory["trainable"] == list(budget_pick.layers)
        assert memory["ram"] == budget_pick.ram <= budget


# ---- 4b. checks that can fail; divergence is an error ---------------------------------

def seq_float_part(seed: int = 0):
    """The seq model's float part with every layer trainable, random weights, boundary
    values and labels: (graph, params, boundary, labels)."""
    graph = seq_graph({"conv2": "all", "conv3": "all", "conv4": "all", "fc": "all"})
    rng = np.random.default_rng(seed)
    params = {name: (0.5 * rng.standard_normal(shape)).astype(np.float32)
              for name, shape in graph.parameters()}
    boundary = {name: rng.uniform(0, 1, (24, size)).astype(np.float32)
                for name, size in graph.boundary}
    return graph, params, boundary, rng.integers(0, 3, 24)


def seq_spec(**fields) -> Ondevice:
    return Ondevice.model_validate({"trainable": ["conv2", "conv3", "conv4", "fc"],
                                    "optimizer": {"sgd": {"lr": 0.01}}, "batch": 1,
                                    "steps": 4, **fields})


def test_verification_steps_take_samples_the_model_gets_wrong():
    """A model sure of every sample but one (huge logits): the seeded batches would have a
    loss of ~0 and compare zeros, so every step takes the one sample it gets wrong."""
    graph, params, boundary, _ = seq_float_part()
    params["fc.weight"] *= 1000
    logits = finetune.Stepper(seq_spec(), graph, params, boundary, np.zeros(24, np.int64))
    with torch_no_grad():
        scores = logits.part.forward({n: torch_of(v) for n, v in boundary.items()}).numpy()
    labels = scores.argmax(axis=1)
    wrong = 5
    labels[wrong] = (labels[wrong] + 1) % 3
    spec = seq_spec(optimizer={"sgd": {"lr": 1e-6}})  # steps that keep the model as it is
    seeded = finetune.fixed_batches(spec.steps, 1, 24, 3)
    assert wrong not in np.concatenate(seeded)  # else the seeded order would find it
    stepper = finetune.Stepper(spec, graph, params, boundary, labels)
    assert finetune.informative(*stepper.gradients(seeded[0]))  # the seeded batch: ~0
    batches, trace = finetune.verification_steps(spec, graph, params, boundary, labels, 3)
    assert [b.tolist() for b in batches] == [[wrong]] * spec.steps
    assert min(trace.losses) >= finetune.LOSS_FLOOR
    for gradients in trace.gradients:
        assert all(np.abs(g).max() >= finetune.GRADIENT_FLOOR for g in gradients.values())


def test_verification_fails_when_no_batch_gives_a_gradient():
    """conv3 off for every sample (its relu never fires): no batch gives its weights a
    gradient, so the stage cannot prove them and says so."""
    graph, params, boundary, labels = seq_float_part()
    params["conv3.weight"][:] = 0
    params["conv3.bias"][:] = -1
    with pytest.raises(finetune.VerificationError,
                       match=r"no gradient for conv3\.weight, no gradient for conv3\.bias"):
        finetune.verification_steps(seq_spec(), graph, params, boundary, labels, 3)


def test_auto_learning_rate_is_the_largest_near_the_lowest_trial_loss():
    graph, params, boundary, labels = seq_float_part()
    spec = seq_spec(optimizer={"sgd": {}}, batch=4)
    assert spec.optimizer.settings.lr == "auto"
    chosen, tried = finetune.with_learning_rate(spec, graph, params, (boundary, labels), 3)
    assert [float(lr) for lr in tried] == list(AUTO_LEARNING_RATES)
    lr = finetune.learning_rate(chosen)
    finite = {float(k): v for k, v in tried.items() if v is not None}
    assert lr in finite and finite[lr] <= finetune.NEAR * min(finite.values())
    assert all(rate <= lr for rate, loss in finite.items()
               if loss <= finetune.NEAR * min(finite.values()))
    # given by the manifest: kept, nothing tried
    given = seq_spec(optimizer={"sgd": {"lr": 0.02}})
    assert finetune.with_learning_rate(given, graph, params, (boundary, labels), 3) == (given, {})
    with pytest.raises(ValueError, match="auto"):
        finetune.learning_rate(spec)


def test_divergence_is_a_non_finite_loss_or_a_tenfold_mean():
    assert finetune.divergence([1.0, 0.5, 0.7], 1.0) is None
    assert "nan at step 2 of 3" in finetune.divergence([1.0, float("nan"), 0.7], 1.0)
    assert "inf at step 1" in finetune.divergence([float("inf")], 1.0)
    rising = [1.0] * 50 + [12.0] * 50
    assert "steps 51-100 is 12, 12x the 1 it started at" in finetune.divergence(rising, 1.0)
    assert finetune.divergence([1.0] * 50 + [9.0] * 50, 1.0) is None
    # one sample's loss alone is noise: a single high step in a window is not divergence
    assert finetune.divergence([0.5] * 49 + [100.0], 0.5) is None


def test_a_diverging_learning_rate_fails_the_build_with_one_line(seq_project, tmp_path):
    section = ("  trainable: [conv2, conv3, conv4, fc]\n  optimizer: {sgd: {lr: 10}}\n"
               "  batch: 1\n  steps: 2\n  epochs: 2\n")
    project(tmp_path, "seq", manifest_text("seq", section))
    result, outcome = build(tmp_path, "--cache-dir", str(seq_project / "cache"))
    assert result.returncode == 1, result.stderr[-2000:]
    status = statuses(outcome, "seq")
    assert "ondevice" not in status and status["train"] in TRAINED, status  # not built
    lines = [line for line in result.stderr.splitlines() if "fine-tuning diverged" in line]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "sgd lr 10" in lines[0] and "try ondevice.optimizer lr 1" in lines[0]
    assert not (out(tmp_path, "seq") / "ondevice" / "finetune.json").exists()


def torch_no_grad():
    import torch

    return torch.no_grad()


def torch_of(values: np.ndarray):
    import torch

    return torch.from_numpy(values)


# ---- 5. tiled weight gradients; the classic bugs injected into the generated C ----------

def tile_count(p: dict, plane) -> int:
    """Tiles of a pass of rows x channels over a batch of 4 (the seq project's)."""
    return 4 * -(-plane.out_c // p["channels"]) * -(-plane.out_h // p["rows"])


def test_passes_are_tiled_through_l1_and_match_torch(seq_project):
    """With l1 = 1 KiB the conv passes do not fit whole: memory.json says how each is tiled,
    every tile fits L1, the C stages exactly those tiles through a buffer of the planned
    size, and the gradients still match torch."""
    built = out(seq_project, "seq")
    memory = read_json(built / "ondevice" / "memory.json")
    c_text = (built / "ondevice" / "train" / "train_model.c").read_text()
    planes = {layer.name: layer.conv for layer in seq_graph(
        {"conv2": "all", "conv3": "all", "conv4": "all", "fc": "all"}).layers if layer.weighted}
    passes = [p for p in memory["passes"] if p["kernel"] == "conv"]
    assert {(p["layer"], p["phase"]) for p in passes} >= {
        (n, phase) for n in ("conv2", "conv3", "conv4", "fc") for phase in ("forward", "weight")}
    assert all(p["l1_bytes"] <= memory["l1_budget"] == 1024 for p in memory["passes"])
    assert memory["l1_peak"] == max(p["l1_bytes"] for p in memory["passes"])
    assert memory["l1_buffer"] == max(p["l1_bytes"] for p in memory["passes"] if p["tiled"])
    assert f"static float ebt_l1[{memory['l1_buffer'] // 4}];" in c_text
    assert memory["traffic"] >= memory["traffic_lower_bound"] > 0
    call = {"forward": "ebt_conv_forward", "weight": "ebt_conv_backward_weight",
            "input": "ebt_conv_backward_input"}
    for p in passes:
        name = call[p["phase"]]
        if p["tiled"]:
            assert p["tiles"] == tile_count(p, planes[p["layer"]]) > 1
            tile = f"T_{p['layer']}_{p['phase']}"
            assert re.search(rf"ebt_tile {tile} = \{{\s*\.rows = {p['rows']},\s*"
                             rf"\.channels = {p['channels']},?\s*\}};", c_text), tile
            assert len(re.findall(rf"{name}_tiled\(&K_{p['layer']}, &{tile}, .*ebt_l1\);",
                                  c_text)) == 1
        else:
            assert p["tiles"] == 1 and p["l1_bytes"] <= 1024
            assert len(re.findall(rf"{name}\(&K_{p['layer']}, ", c_text)) == 1
    assert sum(p["tiled"] for p in passes if p["phase"] == "weight") >= 3
    kat = read_json(built / "ondevice_kat" / "ondevice_kat.json")
    assert kat["within_tolerance"] and kat["grad_check"] <= ondevice_kat.GRAD_TOLERANCE


def test_channel_tiles_of_grouped_linear_and_pool_passes_match_torch(img_project):
    """img under l1 = 1 KiB: the depthwise layer's passes in tiles of some of its channels,
    the linear layer's in tiles whose last one is smaller, the pools' tiled; the C still
    equals PyTorch on every step."""
    built = out(img_project, "img")
    memory = read_json(built / "ondevice" / "memory.json")
    tiled = {(p["layer"], p["phase"]): p for p in memory["passes"] if p["tiled"]}
    assert tiled[("dw", "forward")]["channels"] < 4 and tiled[("dw", "weight")]["tiles"] > 4
    assert 3 % tiled[("fc", "input")]["channels"] != 0  # a remainder tile
    assert {("pool", "pool_forward"), ("pool", "pool_input")} <= set(tiled)
    assert all(p["l1_bytes"] <= 1024 for p in memory["passes"])
    kat = read_json(built / "ondevice_kat" / "ondevice_kat.json")
    assert kat["within_tolerance"] and kat["grad_check"] <= ondevice_kat.GRAD_TOLERANCE


def test_the_training_buffers_are_what_the_plan_says(seq_program):
    """The linked program's training arrays (nm sizes) add up to memory.json: the L1
    buffer is `l1_buffer` bytes, the rest `ram` minus the caller's batch and L1."""
    memory = read_json(seq_program.built / "ondevice" / "memory.json")
    nm = subprocess.run(["nm", "-S", "--defined-only", "build/train_kat"],
                        cwd=seq_program.dir / "train", capture_output=True, text=True,
                        check=True)
    sizes = {}
    for line in nm.stdout.splitlines():
        parts = line.split()
        if len(parts) == 4 and parts[2] in "bBdD":
            sizes[parts[3]] = int(parts[1], 16)
    assert sizes["ebt_l1"] == memory["l1_buffer"]
    training = sum(size for name, size in sizes.items()
                   if re.match(r"(x|d|p|g|s\d)_\w+$", name))
    by_kind = memory["by_kind"]
    assert training == memory["ram"] - by_kind["batch"] - by_kind["l1"]
    assert memory["l2_bytes"] == memory["ram"] - by_kind["l1"] + memory["arena"]


class TrainProgram:
    """The C project of a build (codegen + ondevice/train as train/) copied to `where`,
    one of its training files (train_model.c by default) optionally edited, and
    `train_kat` built with its Makefile."""

    def __init__(self, built: Path, where: Path, edit=None, file: str = "train_model.c"):
        self.built, self.dir = built, where
        shutil.copytree(built / "codegen", where)
        shutil.copytree(built / "ondevice" / "train", where / "train")
        for path in where.rglob("*"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        if edit is not None:
            edited = where / "train" / file
            original = edited.read_text()
            changed = edit(original)
            assert changed != original, "the edit did not apply"
            edited.write_text(changed)
        self.layout, self.layout_id = layout_of(built)
        self.trace = np.load(built / "ondevice" / "trace.npz")
        made = subprocess.run(["make", "-s", "-C", "train", "train_kat"], cwd=where,
                              capture_output=True, text=True, timeout=300)
        assert made.returncode == 0, made.stderr

    @property
    def source(self) -> Path:
        return self.dir / "train" / "train_model.c"

    def run(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["build/train_kat", *args], cwd=self.dir / "train",
                              capture_output=True, text=True, timeout=120)

    def printed(self) -> ondevice_kat.Printed:
        result = self.run()
        assert result.returncode == 0, result.stderr
        return ondevice_kat.printed(result.stdout, self.layout, len(self.steps), "host")

    @property
    def steps(self) -> list[float]:
        return read_json(self.built / "ondevice" / "trace.json")["losses"]

    def mismatching(self, step: int = 0) -> set[str]:
        """Tensors whose gradient at `step` fails the ondevice_kat comparison with the
        PyTorch trace (trace.npz grad:<step>:<name>). The first step shows which tensors
        a bug reaches; after it, every tensor starts from other weights."""
        found = set()
        for name, value in self.printed()["gradients"][step].items():
            reference = self.trace[f"grad:{step}:{name}"]
            rel = ondevice_kat._max_rel_diff(
                [{name: value}], [{name: reference}],
                ondevice_kat.GRAD_FLOOR / ondevice_kat.GRAD_TOLERANCE)
            if rel > ondevice_kat.GRAD_TOLERANCE:
                found.add(name)
        return found


@pytest.fixture(scope="module")
def seq_program(seq_project, tmp_path_factory) -> TrainProgram:
    return TrainProgram(out(seq_project, "seq"), tmp_path_factory.mktemp("seq_c") / "c")


def test_generated_gradients_pass_the_comparison(seq_program):
    assert all(seq_program.mismatching(step) == set()
               for step in range(len(seq_program.steps)))


def test_a_weight_gradient_rezeroed_per_tile_is_caught(seq_project, tmp_path):
    """A tiled weight gradient that overwrites instead of accumulating (its tile's dw not
    staged in, so each tile starts from zero) keeps only the last tile's sum: every layer
    whose weight pass has several tiles is caught, no other."""
    def rezero_each_tile(text: str) -> str:
        return text.replace("ebt_stage(ldw, dw + it.c0 * conv_weights(p), weights);",
                            "memset(ldw, 0, sizeof(float) * (size_t)weights);")

    program = TrainProgram(out(seq_project, "seq"), tmp_path / "c", rezero_each_tile,
                           "eb_train_tiles.c")
    memory = read_json(out(seq_project, "seq") / "ondevice" / "memory.json")
    tiled = {p["layer"] for p in memory["passes"] if p["phase"] == "weight" and p["tiles"] > 1}
    assert tiled and program.mismatching() == {f"{n}.weight" for n in tiled}


def test_a_shared_gradient_overwritten_instead_of_summed_is_caught(seq_project, tmp_path):
    """conv2 feeds conv3 and res: zeroing d_conv2 before its second contribution keeps only
    one branch; conv2's gradients are wrong, everything downstream of it is still right."""
    def overwrite_second_branch(text: str) -> str:
        lines = text.splitlines(keepends=True)
        into = [i for i, line in enumerate(lines)
                if re.search(r"\b(ebt_accumulate|ebt_conv_backward_input(_tiled)?)\(.*"
                             r"\bd_conv2(, ebt_l1)?\);", line)]
        assert len(into) == 2, into
        indent = re.match(r"\s*", lines[into[1]]).group(0)
        lines.insert(into[1], f"{indent}memset(d_conv2, 0, sizeof d_conv2);\n")
        return "".join(lines)

    program = TrainProgram(out(seq_project, "seq"), tmp_path / "c",
                           overwrite_second_branch)
    assert program.mismatching() == {"conv2.weight", "conv2.bias"}


# ---- 6. the weight-only file on the device ----------------------------------------------

@pytest.fixture(scope="module")
def plain_run(seq_program) -> tuple[str, bytes]:
    result = seq_program.run("--save", "plain.wof")
    assert result.returncode == 0, result.stderr
    return result.stdout, (seq_program.dir / "train" / "plain.wof").read_bytes()


def test_loading_a_valid_file_starts_from_its_weights(seq_program, plain_run, tmp_path):
    stdout, saved = plain_run
    program = seq_program
    other = tmp_path / "other.wof"
    wof.write(other, start_values(program.layout, 11), program.layout_id)
    loaded = program.run("--load", str(other), "--save", str(tmp_path / "after.wof"))
    assert loaded.returncode == 0, loaded.stderr
    after = (tmp_path / "after.wof").read_bytes()
    assert after != saved and loaded.stdout != stdout
    final = wof.read(tmp_path / "after.wof", program.layout)
    assert all(np.isfinite(t).all() for t in final)
    # loading the build's own starting weights (ondevice/weights.wof) changes nothing
    same = program.run("--load", str(program.built / "ondevice" / "weights.wof"),
                       "--save", str(tmp_path / "same.wof"))
    assert same.returncode == 0, same.stderr
    assert (tmp_path / "same.wof").read_bytes() == saved and same.stdout == stdout


def corrupted(good: bytes, kind: str) -> bytes:
    data = bytearray(good)
    if kind == "magic":
        data[0:4] = b"EBWX"
    elif kind == "version":
        data[4:6] = (7).to_bytes(2, "little")
    elif kind == "truncated":
        return bytes(data[:-4])
    elif kind == "padded":
        return bytes(data) + bytes(4)
    elif kind == "crc":
        data[20] ^= 0x01
    elif kind == "data":
        data[-1] ^= 0x40
    elif kind == "layout":
        data[16] ^= 0xFF
    return bytes(data)


@pytest.mark.parametrize("kind,message", [
    ("magic", "magic is not EBWF"),
    ("version", "unsupported weight file version"),
    ("truncated", "size field differs from the file length"),
    ("padded", "size field differs from the file length"),
    ("crc", "crc32 mismatch"),
    ("data", "crc32 mismatch"),
    ("layout", "layout id differs"),
])
def test_a_corrupted_file_is_refused_and_the_weights_kept(seq_program, plain_run, tmp_path,
                                                           kind, message):
    stdout, saved = plain_run
    program = seq_program
    good = wof.encode(start_values(program.layout, 11), program.layout_id)
    bad = tmp_path / f"{kind}.wof"
    bad.write_bytes(corrupted(good, kind))
    result = program.run("--load", str(bad), "--save", str(tmp_path / "after.wof"))
    assert result.returncode == 3, (result.returncode, result.stderr)
    assert message in result.stderr and "keeping the previous weights" in result.stderr
    assert str(bad) in result.stderr
    assert result.stdout == stdout  # the same steps ran from the same weights
    assert (tmp_path / "after.wof").read_bytes() == saved


# ---- 7. reproducibility ---------------------------------------------------------------------

def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes()
            for p in sorted(path.rglob("*")) if p.is_file()}


def test_two_clean_builds_give_identical_training_code(seq_project, tmp_path):
    other = project(tmp_path / "again", "seq")
    result, outcome = build(other, "--cache-dir", str(tmp_path / "cache2"))
    assert result.returncode == 0, result.stderr[-4000:]
    assert statuses(outcome, "seq")["train"] == "built"
    first, second = out(seq_project, "seq") / "ondevice", out(other, "seq") / "ondevice"
    first_tree, second_tree = tree(first / "train"), tree(second / "train")
    assert sorted(first_tree) == sorted(second_tree)
    assert "train_model.c" in first_tree
    for name in first_tree:
        assert first_tree[name] == second_tree[name], name
    assert (first / "weights.wof").read_bytes() == (second / "weights.wof").read_bytes()
    text = b"".join(first_tree.values())
    assert str(seq_project).encode() not in text and str(tmp_path).encode() not in text


# ---- 8. the examples ---------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("name", ["motions_ondevice", "vowels_residual"])
def test_examples_meet_the_targets(name, examples_build):
    built = examples_build / name
    metrics = read_json(built / "report.json")["metrics"]["ondevice"]
    assert metrics["steps"] == 8 and len(metrics["loss_c"]) == len(metrics["loss_torch"]) == 8
    assert metrics["meets_target"] is True
    assert metrics["loss_max_rel_diff"] <= 1e-5
    assert metrics["accuracy_after"] > metrics["accuracy_before"]
    memory = read_json(built / "ondevice" / "memory.json")
    assert metrics["memory_bytes"] == memory["ram"]
    if name == "motions_ondevice":
        budget = 40 * 1024
        assert metrics["memory_bytes"] <= budget
        fitting = [c for c in memory["choices"] if c["ram"] <= budget]
        assert metrics["trainable"] == fitting[-1]["layers"]
        assert len(fitting) < len(memory["choices"])  # the budget actually limits
        tiles = [p["tiles"] for p in memory["passes"] if p["phase"] == "weight"]
        assert max(tiles) > 1 and memory["l1_peak"] <= memory["l1_budget"]
    else:
        steps = read_json(built / "ondevice" / "backward.json")["backward"]
        assert len(writers(steps, "conv2")) == 2
        assert metrics["trainable"] == ["conv2", "conv3", "conv4", "fc"]
    if HAS_M4:
        assert isinstance(metrics["instructions_per_step"], int)
        assert metrics["instructions_per_step"] > 0
        assert metrics["cortex_m4_losses_match"] is True
    else:
        assert metrics["instructions_per_step"] is None


@pytest.mark.slow
def test_speechnet_trains_every_block_within_the_references_budgets(examples_build):
    """The reference's case (issue 33): every block and the classifier train; 4 steps, each
    with a loss and every tensor's gradient well above float noise, C == PyTorch on the
    host and the Cortex-M4; the training RAM and the arena within L2 = 2,000,000 B."""
    built = examples_build / "speechnet"
    metrics = read_json(built / "report.json")["metrics"]["ondevice"]
    assert metrics["trainable"] == ["b0", "b1", "b2", "b3", "b4", "fc"]
    assert metrics["steps"] == 4 and min(metrics["loss_torch"]) >= finetune.LOSS_FLOOR
    kat = read_json(built / "ondevice_kat" / "ondevice_kat.json")
    assert kat["within_tolerance"] and kat["grad_check"] <= ondevice_kat.GRAD_TOLERANCE
    assert kat["weight_check"] <= ondevice_kat.WEIGHT_TOLERANCE
    memory = read_json(built / "ondevice" / "memory.json")
    assert memory["l2_bytes"] <= memory["l2_budget"] == 2_000_000
    assert memory["l1_peak"] <= memory["l1_budget"] == 128_000
    assert memory["l2_lower_bound"] < memory["l2_bytes"]
    b0 = {p["phase"]: p for p in memory["passes"] if p["layer"] == "b0"}
    assert b0["forward"]["tiles"] > 1 and b0["weight"]["tiles"] > 1  # its 314 KB output
    tuned = read_json(built / "ondevice" / "finetune.json")
    assert tuned["accuracy_after"] > tuned["accuracy_before"]
    assert tuned["learning_rates_tried"] is not None  # lr auto
    if HAS_M4:
        m4 = kat["cortex_m4"]
        assert m4["m4_within_tolerance"] and m4["m4_grad_check"] <= ondevice_kat.GRAD_TOLERANCE
        phases = {(seg["layer"], seg["phase"]) for seg in m4["segments"]}
        assert {(name, "weight") for name in metrics["trainable"]} <= phases
