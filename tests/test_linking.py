"""Generated C that lives beside other code: two models' projects link into one program
(every global symbol carries the model's name), both known-answer tests pass in it, and
the headers compile as C++ (extern "C").

The models are synthetic (fixed random integer weights, no training), one on Cortex-M4
kernels with a layer tiled through L1, one with the reference kernels: the two projects
share kernel files that would collide without the prefix.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgebuild.codegen import project as codegen
from edgebuild.codegen.header import InputFormat
from edgebuild.manifest import Manifest
from edgebuild.memory.plan import make_plan, tile_steps
from edgebuild.model import folding, quantized
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import QuantParams

CC = shutil.which("cc")
CXX = shutil.which("c++")
NM = shutil.which("nm")

MODELS = {
    "alpha": ("cortex-m4", 1200, [
        {"name": "conv", "op": "conv2d", "out": 6, "kernel": 3, "pad": 1, "act": "relu"},
        {"name": "dw", "op": "conv2d", "out": 6, "groups": 6, "kernel": 3, "pad": 1},
        {"name": "fc", "op": "linear", "out": 4, "flatten": True, "wide": True}]),
    "beta": ("host", 1 << 16, [
        {"name": "conv", "op": "conv2d", "out": 4, "kernel": 3, "pad": 1, "act": "relu",
         "pool": {"mode": "avg", "size": 2}},
        {"name": "fc", "op": "linear", "out": 3, "flatten": True}]),
}


# Each header also carries its input normalization (per channel, or one pair) and labels.
INPUTS = {
    "alpha": InputFormat("standard", (0.5, -1.25), (2.0, 0.3), ("a", "b", "c", "d")),
    "beta": InputFormat("minmax", (8.0,), (8.0,), ("zero", "one \"1\"", "two?")),
}


def spec(name: str, seed: int = 3, models: dict | None = None) -> codegen.ProjectSpec:
    device, l1, layers = (models or MODELS)[name]
    manifest = Manifest.model_validate({"name": name, "dataset": {"format": "sklearn-digits"},
                                        "model": {"input": [2, 6, 6], "layers": layers}})
    folded, _ = folding.fold_layers(manifest.model.layers)
    graph, _ = graphs.build((2, 6, 6), folded)
    rng = np.random.default_rng(seed)
    params = {}
    for node, layer in zip(graph.nodes, folded, strict=True):
        if OPS[layer.op].computes:
            shape = OPS[layer.op].weights.shape(layer, node.in_shapes[0])
            params[layer.name] = QuantParams(rng.integers(-8, 8, shape),
                                             rng.integers(-300, 300, layer.out), -1, 4)
    model = quantized.QuantizedModel((2, 6, 6), folded, params, "half_up")
    plan, problems = tile_steps((2, 6, 6), folded, make_plan((2, 6, 6), folded, 0), l1, 1 << 20,
                                True, split=device in codegen.OPTIMIZED_CPUS)
    assert not problems
    x = rng.integers(-128, 128, (3, 2, 6, 6)).astype(np.int8)
    return codegen.ProjectSpec(name=name, model=model, plan=plan, kat_inputs=x,
                               kat_expected=quantized.run_reference(model, x).reshape(3, -1),
                               flash_bytes=1 << 20, ram_bytes=1 << 20, device=device,
                               inputs=INPUTS.get(name))


def write(files: dict[str, str], root: Path) -> None:
    """A model's files and its KAT vectors in one directory (kat_vectors.h includes cnn.h)."""
    for relative, text in files.items():
        if relative.startswith("model/") or relative.startswith("kat/"):
            (root / Path(relative).name).write_text(text)


KAT = """\
#define KAT(p, P)                                                                   \\
    do {                                                                            \\
        int s, f, i, bad = 0;                                                       \\
        static p##cnn_output_t out[P##CNN_OUTPUT_SIZE];                             \\
        p##cnn_init();                                                              \\
        for (s = 0; s < P##KAT_SAMPLES; ++s) {                                      \\
            p##cnn_reset();                                                         \\
            for (f = 0; f < P##CNN_FRAMES; ++f) {                                   \\
                p##cnn_load_input(p##kat_inputs[s] + f * P##CNN_INPUT_SIZE);        \\
                p##cnn_run();                                                       \\
            }                                                                       \\
            p##cnn_unload(out);                                                     \\
            for (i = 0; i < P##CNN_OUTPUT_SIZE; ++i)                                \\
                bad += out[i] != p##kat_expected[s][i];                             \\
        }                                                                           \\
        printf(#p " %d\\n", bad);                                                   \\
        failures += bad;                                                            \\
    } while (0)
"""


def main_source(names: list[str]) -> str:
    """A program running every model's known-answer test (each model in its directory)."""
    includes = "".join(f'#include "{name}/kat_vectors.h"\n' for name in names)
    calls = "".join(f"    KAT({name}_, {name.upper()}_);\n" for name in names)
    return (f"#include <stdio.h>\n{includes}\n{KAT}\nint main(void)\n{{\n"
            f"    int failures = 0;\n{calls}    return failures != 0;\n}}\n")


def link_and_run(root: Path, names: list[str]) -> subprocess.CompletedProcess:
    """Compile `root/main.c` with every model's sources into one program and run it."""
    (root / "main.c").write_text(main_source(names))
    built = subprocess.run([CC, "-std=c99", "-O1", "-Wall", "-Wextra", "-Werror", "-DEB_HOST",
                            "-o", "all", "main.c", *sources(root)], cwd=root,
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    return subprocess.run(["./all"], cwd=root, capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def program(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("two")
    for name in MODELS:
        (root / name).mkdir()
        write(codegen.render(spec(name)), root / name)
    return root


def sources(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.glob("*/*.c"))


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_two_models_link_into_one_program_and_both_kats_pass(program):
    ran = link_and_run(program, list(MODELS))
    assert ran.returncode == 0 and ran.stdout.split() == ["alpha_", "0", "beta_", "0"], ran.stdout


@pytest.mark.skipif(CC is None or NM is None, reason="needs a C compiler and nm")
def test_every_global_symbol_carries_the_model_name(program, tmp_path):
    for name in MODELS:
        for source in sorted((program / name).glob("*.c")):
            obj = tmp_path / f"{name}_{source.stem}.o"
            subprocess.run([CC, "-std=c99", "-O1", "-DEB_HOST", "-c", str(source), "-o",
                            str(obj)], check=True, capture_output=True, timeout=120)
            table = subprocess.run([NM, "--defined-only", "-g", str(obj)], check=True,
                                   capture_output=True, text=True).stdout
            symbols = [line.split()[-1] for line in table.splitlines() if line.strip()]
            assert symbols, source
            stray = [s for s in symbols if not s.startswith(f"{name}_")]
            assert not stray, f"{source.name}: {stray}"


def compile_cpp(includes: list[Path], out: Path) -> subprocess.CompletedProcess:
    probe = out.with_suffix(".cpp")
    probe.write_text("".join(f'#include "{p}"\n' for p in includes) + "int main() { return 0; }\n")
    return subprocess.run([CXX, "-std=c++11", "-Wall", "-Werror", "-c", str(probe), "-o",
                           str(out)], capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
def test_headers_compile_as_cpp(program, tmp_path):
    """Each model's headers in a C++ file, and both models' API headers in one."""
    for name in MODELS:
        headers = [p for p in sorted((program / name).glob("*.h")) if p.name != "kat_vectors.h"]
        built = compile_cpp(headers, tmp_path / f"{name}.o")
        assert built.returncode == 0, built.stderr
    api = [program / name / header for name in MODELS for header in ("cnn.h", "weights.h")]
    built = compile_cpp(api, tmp_path / "both.o")
    assert built.returncode == 0, built.stderr


def test_kernel_paths_a_model_does_not_use_are_left_out(program):
    """alpha has a depthwise layer on the Cortex-M4 kernels: the depthwise path stays; a
    model without one leaves it out (less code), a host model has no optimized kernels."""
    assert "EB_OPT_NO_DEPTHWISE" not in (program / "alpha" / "eb_config.h").read_text()
    assert "EB_OPT_NO_DEPTHWISE" not in (program / "beta" / "eb_config.h").read_text()
    dense = [layer for layer in MODELS["alpha"][2] if layer["name"] != "dw"]
    files = codegen.render(spec("gamma", models={"gamma": ("cortex-m4", 1 << 16, dense)}))
    assert "#define EB_OPT_NO_DEPTHWISE" in files["model/eb_config.h"]
