"""The MAX7800x accelerator program equals the vendor synthesis tool's ("izer") on real
models: the canonical form of what edgebuild generates (registers, start sequence, kernel and
bias memory, input, expected output) is compared with committed canonical JSON that the
shared tool made of izer's own project for the same network, weights and input.

A case is (manifest with placement, weights.npz, input.npy, expected output of the last layer,
program.json): further cases (random networks, other vendor models, MAX78002) plug in as
entries of CASES.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from edgebuild.core import document as yamlsource
from edgebuild.manifest import reading
from edgebuild.model import folding, policy
from edgebuild.targets.max7800x import layout
from edgebuild.targets.max7800x import profile as devices
from edgebuild.targets.max7800x.program import build, device, program

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
    hw, placed, problems = layout.layout(manifest, layers, bits)
    assert not problems and placed is not None, problems
    profile = devices.profile(manifest.target.device.value)
    return build.generate(device.device(profile.family), profile, hw, placed,
                          {layer.name: layer for layer in layers}, dict(np.load(case.weights)),
                          np.load(case.sample), np.load(case.expected))


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
