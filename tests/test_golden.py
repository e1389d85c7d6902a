"""Golden files: the rendered C of a tiny fixed model, and the project of a small
.tflite imported in TFLite's number format, compared with committed copies.

The model's integer weights are synthetic and fixed (no training), so any change in the
rendered output is a change in codegen or its templates. Files the project copies verbatim
from templates/ (kernel sources, startup code) are kept as one COPIES.txt line each. Regenerate deliberately with
`python scripts/regen.py golden` (which runs this file with `--update-golden`) and review
the diff.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgebuild.codegen import project as codegen
from edgebuild.codegen.header import InputFormat
from edgebuild.core.resources import templates_dir
from edgebuild.manifest import Manifest
from edgebuild.memory.plan import make_plan
from edgebuild.model import folding, quantized
from edgebuild.ops.operator import QuantParams

GOLDEN = Path(__file__).resolve().parent / "golden" / "tiny"
REGENERATE = ("if intended, run `python scripts/regen.py golden` (it runs this file with "
              "--update-golden) and review the diff")


def verbatim(relative: str, text: str) -> str | None:
    """The template a project file is a byte-for-byte copy of (a static kernel source, the
    startup code), else None."""
    root = templates_dir()
    for candidate in (root / "kernels" / Path(relative).name, root / "project" / relative):
        if candidate.is_file() and candidate.read_text() == text:
            return candidate.relative_to(root).as_posix()
    return None


def golden_form(files: dict[str, str]) -> dict[str, str]:
    """The rendered files as the golden directories keep them: the generated ones whole, the
    verbatim copies of templates as one COPIES.txt line each (which template; the copy is
    checked byte for byte here, and templates/kernels has its own tests)."""
    kept: dict[str, str] = {}
    copies = []
    for relative, text in files.items():
        source = verbatim(relative, text)
        if source is None:
            kept[relative] = text
        else:
            copies.append(f"{relative} = templates/{source}\n")
    kept["COPIES.txt"] = "".join(sorted(copies))
    return kept


def check_golden(request, root: Path, rendered: dict[str, str]) -> None:
    files = golden_form(rendered)
    if request.config.getoption("--update-golden"):
        update(root, files)
    committed = {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()}
    assert committed == set(files), f"file set changed; {REGENERATE}"
    for relative, text in files.items():
        assert (root / relative).read_text() == text, (
            f"{relative} differs from {root.relative_to(root.parent.parent)}; {REGENERATE}")


def update(root: Path, files: dict[str, str]) -> None:
    """Write `files` under `root` and remove the files there it no longer renders."""
    for path in root.rglob("*"):
        if path.is_file() and path.relative_to(root).as_posix() not in files:
            path.unlink()
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

LAYERS = [
    {"name": "conv", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1, "act": "relu",
     "pool": {"mode": "max", "size": 2, "stride": 1}},
    {"name": "side", "op": "conv2d", "out": 4, "kernel": 1, "inputs": ["conv"], "bias": False},
    {"name": "sum", "op": "add", "inputs": ["conv", "side"], "act": "abs"},
    {"name": "pool", "op": "pool2d", "mode": "avg", "size": 2},
    {"name": "cat", "op": "concat", "inputs": ["pool", "pool"]},
    {"name": "flat", "op": "flatten"},
    {"name": "fc", "op": "linear", "out": 3, "wide": True},
]


def tiny_spec() -> codegen.ProjectSpec:
    manifest = Manifest.model_validate({"name": "tiny", "dataset": {"format": "sklearn-digits"},
                                        "model": {"input": [2, 5, 5], "layers": LAYERS},
                                        "quantize": {"rounding": "floor"}})
    layers, _ = folding.fold_layers(manifest.model.layers)
    rng = np.random.default_rng(7)
    shapes = {"conv": (4, 2, 3, 3), "side": (4, 4, 1, 1), "fc": (3, 32)}
    params = {name: QuantParams(rng.integers(-8, 8, shape), None if name == "side" else
                                rng.integers(-300, 300, shape[0]), -2, 4)
              for name, shape in shapes.items()}
    model = quantized.QuantizedModel((2, 5, 5), layers, params, "floor")
    x = rng.integers(-128, 128, (2, 2, 5, 5)).astype(np.int8)
    return codegen.ProjectSpec(
        name="tiny", model=model, plan=make_plan((2, 5, 5), layers, 1000),
        kat_inputs=x, kat_expected=quantized.run_reference(model, x),
        flash_bytes=65536, ram_bytes=16384, device="cortex-m4",
        inputs=InputFormat("standard", (0.1, -2.5), (3.0, 1e-05), ("up", "down \"?\"", "é")))


def test_rendered_c_matches_golden_files(request):
    check_golden(request, GOLDEN, codegen.render(tiny_spec()))


def test_rendering_is_deterministic():
    assert codegen.render(tiny_spec()) == codegen.render(tiny_spec())


GOLDEN_TFLITE = GOLDEN.parent / "tflite"


def tflite_project(tmp_path: Path) -> dict[str, str]:
    """The generated project of a small int8 .tflite the tests write (conv, depthwise,
    residual ADD, max pool, reshape, fully connected, softmax: TFLite's number format),
    imported and built for the Cortex-M4 up to codegen."""
    import tflite_models
    from conftest import run_cli

    graph = tflite_models.random_chain(np.random.default_rng(2))
    model = tflite_models.write_file(graph, tmp_path / "chain.tflite")
    for args in (["import-tflite", str(model), "--name", "chain", "--device", "cortex-m4"],
                 ["build", "chain.yaml", "--until", "codegen"]):
        result = run_cli(args, tmp_path)
        assert result.returncode == 0, result.stderr
    root = tmp_path / "build" / "chain" / "codegen"
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*"))
            if p.is_file()}


def test_tflite_project_matches_golden_files(request, tmp_path):
    check_golden(request, GOLDEN_TFLITE, tflite_project(tmp_path))


ACCELERATOR_GOLDEN = Path(__file__).resolve().parent / "golden" / "max7800x-mnist-extrasmall"


def test_rendered_accelerator_program_matches_golden_files(request):
    """The MSDK project of mnist-extrasmall (the published model, its committed weights and
    sample): any change of its C text is a change of the program's renderer or templates
    (test_ai8x_program checks that what it programs stays the vendor tool's)."""
    from test_ai8x_program import CASES, render

    files = render(CASES["mnist-extrasmall"], "mnist-extrasmall")
    if request.config.getoption("--update-golden"):
        update(ACCELERATOR_GOLDEN, files)
    committed = {p.name for p in ACCELERATOR_GOLDEN.iterdir() if p.is_file()}
    assert committed == set(files), f"file set changed; {REGENERATE}"
    for name, text in files.items():
        assert (ACCELERATOR_GOLDEN / name).read_text() == text, (
            f"{name} differs from {ACCELERATOR_GOLDEN.name}; {REGENERATE}")
