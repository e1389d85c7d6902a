"""benchmarks/shapes.py, the shape benchmark of issue 32: its generator covers what it says
(every op, kernel form, stride, dilation, grouping and first-layer channel count), stays
inside its budgets and is reproducible; and -- the property test of the kernels over the
same generator -- a seeded sample of its shapes and chains, built by edgebuild through the
generated C with random weights, passes the known-answer test bit for bit on the host and
on the Cortex-M4 (the `kat` stage fails on any mismatch), with per-layer figures read back
as the benchmark reads them."""

from __future__ import annotations

import importlib.util
import sys
from argparse import Namespace
from pathlib import Path

import pytest
from test_kernels_opt import needs_m4

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def load_shapes():
    sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location("shapes", BENCH / "shapes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["shapes"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


shapes = load_shapes()


def test_generator_is_reproducible_and_seeded():
    assert shapes.generate(32, 40) == shapes.generate(32, 40)
    assert shapes.generate(32, 40) != shapes.generate(33, 40)
    assert shapes.chains(5, 6) == shapes.chains(5, 6)
    assert len(set(shapes.generate(1, 120))) == 120


def test_generator_covers_real_model_shapes():
    layers = shapes.generate(32, 300)
    convs = [x for x in layers if x.op in ("conv1d", "conv2d")]
    assert {x.op for x in layers} == {"conv1d", "conv2d", "linear", "pool1d", "pool2d"}
    kernels = {x.kernel for x in convs if x.op == "conv2d"}
    assert any(kh == kw > 1 for kh, kw in kernels)                  # square
    assert any(kh == 1 and kw > 1 for kh, kw in kernels)            # 1xK
    assert any(kw == 1 and kh > 1 for kh, kw in kernels)            # Kx1
    assert any(1 < kh != kw > 1 for kh, kw in kernels)              # KhxKw (10x4)
    assert max(max(k) for k in kernels) >= 13
    assert any(2 in x.stride for x in convs) and any(2 in x.dilation for x in convs)
    assert any(x.pad != (0, 0) for x in convs) and any(x.pad == (0, 0) for x in convs)
    depthwise = [x for x in convs if x.groups == x.cin > 1]
    assert {x.cout // x.cin for x in depthwise} == {1, 2, 3, 4}
    assert any(1 < x.groups < x.cin for x in convs)                 # grouped
    assert {1, 3} <= {x.cin for x in convs} and max(x.cin for x in convs) == 256
    assert max(x.cin for x in layers if x.op == "linear") >= 1024
    assert sum(x.macs() >= shapes.MIN_MACS for x in layers) >= 200


def test_generated_layers_fit_the_budgets():
    for layer in shapes.generate(7, 200):
        oh, ow = layer.out_size()
        assert oh >= 1 and ow >= 1, layer
        assert layer.macs() <= shapes.MAX_MACS and layer.weight_count() <= shapes.MAX_WEIGHTS
        if layer.op != "linear":
            assert layer.activation_bytes() <= shapes.MAX_ACTIVATION, layer
            assert max(layer.pad) <= 64 and max(layer.kernel) <= 15
        if layer.groups > 1:
            assert layer.cin % layer.groups == 0 and layer.cout % layer.groups == 0


def test_summary_quantiles_and_worst():
    rows = [{"model": f"m{i}", "layer": "l0", "status": "pass", "macs": 5000,
             "insn_per_mac": v, "cycles_per_mac": 2 * v, "instructions": int(5000 * v),
             "cycles": int(10000 * v), "cmsis_instructions": 6000 if i == 3 else None,
             "cmsis_cycles": 1 if i == 3 else None} for i, v in enumerate((1.0, 2.0, 3.0, 4.0))]
    rows.append({"model": "small", "layer": "l0", "status": "pass", "macs": 100,
                 "insn_per_mac": 50.0, "cycles_per_mac": 60.0, "instructions": 5000,
                 "cycles": 6000, "cmsis_instructions": None, "cmsis_cycles": None})
    rows.append({"model": "broken", "status": "FAILED"})
    s = shapes.summary(rows)
    assert s["layers"] == 4 and s["failed"] == ["broken"]
    assert s["insn_per_mac"]["median"] == pytest.approx(2.5)
    assert s["insn_per_mac"]["p90"] == pytest.approx(3.7)
    assert s["insn_per_mac"]["worst"] == 4.0                         # "small" does not count
    assert s["worst_ten"][0] == "m3/l0" and s["above_cmsis"] == ["m3/l0"]


@pytest.mark.slow
@needs_m4
def test_generated_shapes_build_bit_exact_host_and_m4(tmp_path):
    """Every sampled shape and chain passes its known answer (2 samples) on both targets;
    the rows carry the counts the benchmark's distribution is made of."""
    models = {f"s{i:03d}": [layer] for i, layer in enumerate(shapes.generate(11, 7))}
    models.update({f"c{i:02d}": chain for i, chain in enumerate(shapes.chains(11, 3))})
    args = Namespace(samples=2, seed=11, jobs=2, no_cmsis=True, code=False)
    rows = shapes.measure(tmp_path, models, args)
    failed = [r["model"] for r in rows if r["status"] != "pass"]
    assert not failed, (tmp_path / "build.log").read_text()[-4000:]
    assert len(rows) == sum(len(chain) for chain in models.values())
    for name in models:
        kat = (tmp_path / "build" / name / "kat" / "kat.json").read_text()
        assert '"mismatches": 0' in kat and '"kat": "pass"' in kat and '"samples": 2' in kat
    for row in rows:
        assert row["instructions"] > 0 and row["path"] != "?"
        if row["macs"]:
            assert row["insn_per_mac"] == pytest.approx(row["instructions"] / row["macs"],
                                                         abs=1e-3)


def test_only_refuses_a_model_it_did_not_draw():
    """`--only` measures some of the drawn models; a name not drawn is a usage error (exit 2,
    the drawn names said), before anything is built."""
    import subprocess

    result = subprocess.run([sys.executable, str(BENCH / "shapes.py"), "--count", "5",
                             "--chains", "2", "--only", "s001", "s005"],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2
    assert "--only: no drawn model s005 (drawn: s000..s004, c00..c01)" in result.stderr
