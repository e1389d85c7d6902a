"""cnn.h for a firmware author (codegen/header.py): the input conversion reproduces the
data stage's int8 inputs bit for bit, and the class names are there as C strings.

The conversion is checked against edgebuild itself: a real `data` stage run on an npz
dataset (per-channel standard normalization, float64 raw values, test values placed on
and around every rounding boundary and far outside the range) gives the expected int8
inputs, and a program compiled against the generated header converts the same raw values
— by value in double, and as a float buffer for the values a float holds — on the host
(strict C99, and -O3 with floating-point contraction) and on the Cortex-M4 under QEMU
(software double). tests/test_cproject.py does the same for a trained digits model's
known-answer vectors.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from edgebuild.codegen import project as codegen
from edgebuild.codegen.header import InputFormat, c_double, c_string
from edgebuild.manifest import Manifest
from edgebuild.memory.plan import make_plan
from edgebuild.model import folding, quantized
from edgebuild.model import graph as graphs
from edgebuild.ops import OPS
from edgebuild.ops.operator import QuantParams

try:  # tests/ as rootdir-relative modules, or as a package (tests/__init__.py)
    from conftest import build_json
except ModuleNotFoundError:
    from tests.conftest import build_json

CC = shutil.which("cc")
CXX = shutil.which("c++")
CHANNELS, LENGTH, CLASSES = 3, 20, 4

CHECK = """\
/* Raw values -> int8 inputs through the generated header, against edgebuild's own. */
#include <stdio.h>
#include <string.h>

#include "cnn.h"
#include "raw_samples.h"
#ifdef CHECK_KAT
#include "kat_vectors.h"
#endif

int main(void)
{
    static float raw_float[@P@CNN_INPUT_SIZE];
    static int8_t input[@P@CNN_INPUT_SIZE];
    int s, i, bad = 0;
    for (s = 0; s < RAW_SAMPLES; ++s) {
        for (i = 0; i < @P@CNN_INPUT_SIZE; ++i) {
            int8_t q = @p@cnn_quantize_value(raw_values[s][i], i / @P@CNN_INPUT_GROUP_SIZE);
            if (q != raw_expected[s][i]) {
                printf("sample %d value %d: %d, expected %d\\n", s, i, q, raw_expected[s][i]);
                ++bad;
            }
            raw_float[i] = (float)raw_values[s][i];
        }
        if (raw_float_exact[s]) {
            @p@cnn_quantize_input(raw_float, input);
            if (memcmp(input, raw_expected[s], sizeof input) != 0) {
                printf("sample %d: the float buffer differs\\n", s);
                ++bad;
            }
        }
    }
#ifdef CHECK_KAT
    for (s = 0; s < @P@KAT_SAMPLES; ++s) {
        for (i = 0; i < @P@CNN_INPUT_SIZE; ++i) {
            raw_float[i] = (float)raw_values[s][i];
        }
        @p@cnn_quantize_input(raw_float, input);
        if (memcmp(input, @p@kat_inputs[s], sizeof input) != 0) {
            printf("KAT sample %d: the input differs\\n", s);
            ++bad;
        }
    }
#endif
    printf("raw -> int8: %d mismatches in %d samples\\n", bad, RAW_SAMPLES);
    return bad != 0;
}
"""


def check_program(name: str) -> str:
    return CHECK.replace("@p@", f"{name}_").replace("@P@", f"{name.upper()}_")


def raw_samples_header(raw: np.ndarray, expected: np.ndarray) -> str:
    """The raw samples as exact doubles, edgebuild's int8 inputs for them, and which
    samples a float holds exactly (the float-buffer function is checked on those)."""
    raw = raw.reshape(len(raw), -1)
    exact = [int(np.array_equal(row.astype(np.float32).astype(np.float64), row)) for row in raw]
    rows = ",\n".join("    { " + ", ".join(c_double(v) for v in row) + " }" for row in raw)
    wanted = ",\n".join("    { " + ", ".join(str(int(v)) for v in row) + " }"
                        for row in expected.reshape(len(expected), -1))
    return (f"#define RAW_SAMPLES {len(raw)}\n"
            f"static const double raw_values[RAW_SAMPLES][{raw.shape[1]}] = {{\n{rows}\n}};\n"
            f"static const int8_t raw_expected[RAW_SAMPLES][{raw.shape[1]}] = {{\n{wanted}\n}};\n"
            f"static const int raw_float_exact[RAW_SAMPLES] = {{ {', '.join(map(str, exact))} }};\n")


def run_check(project: Path, name: str, raw: np.ndarray, expected: np.ndarray,
              kat: bool = False) -> list[str]:
    """Build the check as the project's main.c on the host (two ways) and, with the ARM
    toolchain, for the Cortex-M4 under QEMU; each run's last line."""
    from edgebuild.targets import toolchain

    (project / "main.c").write_text(check_program(name))
    (project / "kat" / "raw_samples.h").write_text(raw_samples_header(raw, expected))
    defines = " -DCHECK_KAT" if kat else ""
    strict = subprocess.run([CC or "cc", "-std=c99", "-fsyntax-only", "-Wall", "-Wextra",
                             "-Wpedantic", "-Wconversion", "-Wdouble-promotion", "-Werror",
                             "-Imodel", "-Ikat", *defines.split(), "main.c"], cwd=project,
                            capture_output=True, text=True, timeout=120)
    assert strict.returncode == 0, strict.stderr  # the header is warning-free for firmware
    lines = []
    for flags in ("-std=c99 -O0 -Wall -Wextra", "-std=gnu99 -O3 -ffp-contract=fast -march=native"):
        subprocess.run(["make", "-s", "-B", "cnn_kat", f"CFLAGS={flags}{defines}"], cwd=project,
                       check=True, capture_output=True, timeout=300)
        ran = subprocess.run(["build/cnn_kat"], cwd=project, capture_output=True, text=True,
                             timeout=120)
        assert ran.returncode == 0, ran.stdout[-3000:]
        lines.append(ran.stdout.strip().splitlines()[-1])
    tools = toolchain.arm_toolchain()
    if tools is not None:
        subprocess.run(["make", "-s", "m4", f"M4_CFLAGS=-std=c99 -O2{defines}"], cwd=project,
                       check=True, capture_output=True, timeout=300)
        ran_m4 = toolchain.run_qemu(tools, project / "build" / "cnn_kat_m4.elf", timeout=300)
        assert ran_m4.exit_code == 0, ran_m4.stdout[-3000:] + ran_m4.stderr[-2000:]
        lines.append(ran_m4.stdout.strip().splitlines()[-1])
    return lines


def spec(name: str, inputs: InputFormat | None, shape: tuple[int, ...] = (CHANNELS, LENGTH),
         classes: int = CLASSES) -> codegen.ProjectSpec:
    """A one-layer model (fixed random integer weights) with the given input format."""
    layers = [{"name": "fc", "op": "linear", "out": classes, "flatten": True, "wide": True}]
    manifest = Manifest.model_validate({"name": name, "dataset": {"format": "sklearn-digits"},
                                        "model": {"input": list(shape), "layers": layers}})
    folded, _ = folding.fold_layers(manifest.model.layers)
    graph, _ = graphs.build(shape, folded)
    rng = np.random.default_rng(2)
    node, layer = graph.nodes[0], folded[0]
    weights = OPS[layer.op].weights.shape(layer, node.in_shapes[0])
    model = quantized.QuantizedModel(shape, folded, {"fc": QuantParams(
        rng.integers(-8, 8, weights), rng.integers(-300, 300, classes), -1, 4)}, "half_up")
    x = rng.integers(-128, 128, (2, *shape)).astype(np.int8)
    return codegen.ProjectSpec(name=name, model=model, plan=make_plan(shape, folded, 0),
                               kat_inputs=x, kat_expected=quantized.run_reference(model, x),
                               flash_bytes=1 << 20, ram_bytes=1 << 18, device="host",
                               inputs=inputs)


def write_project(files: dict[str, str], root: Path) -> Path:
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# ---- literals ---------------------------------------------------------------------------

def test_double_literals_read_back_to_the_same_double():
    rng = np.random.default_rng(0)
    values = [0.0, -0.0, 8.0, 0.1, 1e-05, 5e-324, 1.7976931348623157e308,
              *(rng.normal(size=50) * 10.0 ** rng.integers(-30, 30, 50)).tolist()]
    assert all(float(c_double(v)) == v for v in values)
    with pytest.raises(ValueError):
        c_double(float("nan"))


def test_string_literals_escape_quotes_trigraphs_and_non_ascii():
    assert c_string('say "hi"\\') == '"say \\"hi\\"\\\\"'
    assert c_string("??=") == '"\\?\\?="'  # no trigraph in C99
    assert c_string("é\n") == '"\\303\\251\\012"'


# ---- the header -------------------------------------------------------------------------

LABELS = ("up", 'say "why?"', "é", "back\\slash")


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_labels_and_constants_compile_and_read_back(tmp_path):
    inputs = InputFormat("standard", (1.0, 2.0, 3.0), (0.5, 0.25, 4.0), LABELS)
    header = codegen.render(spec("lab", inputs))["model/cnn.h"]
    (tmp_path / "cnn.h").write_text(header)
    (tmp_path / "main.c").write_text(
        '#include <stdio.h>\n#include "cnn.h"\nint main(void)\n{\n    int i;\n'
        '    printf("%d %d %d\\n", LAB_CNN_NUM_CLASSES, LAB_CNN_INPUT_GROUPS, '
        'LAB_CNN_INPUT_GROUP_SIZE);\n'
        '    for (i = 0; i < LAB_CNN_NUM_CLASSES; ++i) {\n'
        '        printf("[%s]\\n", lab_cnn_labels[i]);\n    }\n'
        '    printf("%.17g %.17g\\n", lab_cnn_input_offset[2], lab_cnn_input_scale[1]);\n'
        '    return 0;\n}\n')
    subprocess.run([CC, "-std=c99", "-Wall", "-Wextra", "-Wpedantic", "-Werror", "-o", "lab",
                    "main.c"], cwd=tmp_path, check=True, capture_output=True, timeout=120)
    out = subprocess.run(["./lab"], cwd=tmp_path, check=True, capture_output=True,
                         timeout=60).stdout.decode()
    assert out.splitlines() == ["4 3 20", *(f"[{label}]" for label in LABELS), "3 0.25"]


@pytest.mark.skipif(CXX is None, reason="needs a C++ compiler")
def test_header_compiles_as_cpp_with_every_kind_of_input_format(tmp_path):
    kinds = {"per_channel": InputFormat("minmax", (1.0, 2.0, 3.0), (1.0, 1.0, 2.0), LABELS),
             "global": InputFormat("standard", (0.5,), (3.0,), LABELS),
             "none": None}
    probe = tmp_path / "probe.cpp"
    for kind, inputs in kinds.items():
        (tmp_path / f"{kind}.h").write_text(codegen.render(spec(kind, inputs))["model/cnn.h"])
    probe.write_text("".join(f'#include "{kind}.h"\n' for kind in kinds)
                     + "int main() { return 0; }\n")
    built = subprocess.run([CXX, "-std=c++11", "-Wall", "-Wextra", "-Werror", "-c",
                            str(probe), "-o", str(tmp_path / "probe.o")], capture_output=True,
                           text=True, timeout=120)
    assert built.returncode == 0, built.stderr


def test_a_model_without_a_dataset_gets_no_labels_and_no_conversion():
    header = codegen.render(spec("imported", None))["model/cnn.h"]
    assert "_cnn_labels" not in header and "_cnn_quantize" not in header
    assert "No dataset: the inputs are int8 as the model's source normalized them" in header


def test_labels_only_when_the_classes_are_the_outputs():
    inputs = InputFormat("minmax", (0.0,), (1.0,), ("a", "b"))
    header = codegen.render(spec("other", inputs))["model/cnn.h"]
    assert "other_cnn_labels" not in header and "other_cnn_quantize_input" in header


def test_statistics_per_value_of_a_framed_sample_are_left_to_data_json():
    """Per-channel statistics of a 1-D sample are one pair per value; cut into frames, a
    frame's values do not own one pair each: the header says where they are instead."""
    inputs = InputFormat("standard", tuple(float(v) for v in range(8)), (1.0,) * 8, ())
    header = codegen.render(spec("framed", inputs, (4,), 2))["model/cnn.h"]
    assert "_cnn_quantize" not in header and "data/data.json" in header


# ---- against the data stage -------------------------------------------------------------

def _npz(path: Path, x_test: np.ndarray) -> None:
    rng = np.random.default_rng(11)
    means = np.array([100.0, -5.0, 0.01])[None, :, None]
    stds = np.array([20.0, 0.5, 0.002])[None, :, None]
    x_train = rng.normal(size=(120, CHANNELS, LENGTH)) * stds + means
    np.savez(path, x_train=x_train, y_train=np.arange(120) % CLASSES, x_test=x_test,
             y_test=np.arange(len(x_test)) % CLASSES)


def _boundaries(offset: np.ndarray, scale: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Raw test values whose 128 x' + 0.5 lands on or next to an integer (every rounding
    step of the int8 range, both saturation edges), far out of range, and at random;
    (N, CHANNELS, LENGTH), then each sample rounded to float (the float buffer's case)."""
    steps = np.arange(-132, 133)
    per_channel = []
    for c in range(CHANNELS):
        on = offset[c] + scale[c] * (steps - 0.5) / 128.0
        values = np.concatenate([on, np.nextafter(on, np.inf), np.nextafter(on, -np.inf),
                                 [offset[c] + 1e30 * scale[c], offset[c] - 1e30 * scale[c],
                                  offset[c]],
                                 offset[c] + scale[c] * rng.normal(size=34)])
        per_channel.append(values)
    count = len(per_channel[0])
    x = np.stack(per_channel, axis=0)[:, : count - count % LENGTH].reshape(CHANNELS, -1, LENGTH)
    x = np.moveaxis(x, 1, 0)
    return np.concatenate([x, x.astype(np.float32).astype(np.float64)])


@pytest.mark.skipif(CC is None, reason="needs a C compiler")
def test_conversion_reproduces_the_data_stages_inputs_bit_for_bit(tmp_path):
    root = tmp_path / "p"
    (root / "manifests").mkdir(parents=True)
    data = root / "manifests" / "d.npz"
    _npz(data, np.zeros((4, CHANNELS, LENGTH)))
    (root / "manifests" / "m.yaml").write_text(
        "name: m\nseed: 3\ndataset:\n  format: npz\n  path: d.npz\n"
        "  normalize: {method: standard, per_channel: true}\n"
        f"model:\n  input: [{CHANNELS}, {LENGTH}]\n  layers:\n"
        f"    - {{name: fc, op: linear, out: {CLASSES}, flatten: true, wide: true}}\n")
    build_json(root, "--until", "data")
    info = json.loads((root / "build" / "m" / "data" / "data.json").read_text())
    offset, scale = (np.array(info["normalize"][key]) for key in ("offset", "scale"))
    raw = _boundaries(offset, scale, np.random.default_rng(5))
    _npz(data, raw)  # the same training data: the same statistics, new test samples
    build_json(root, "--until", "data")
    again = json.loads((root / "build" / "m" / "data" / "data.json").read_text())
    assert again["normalize"] == info["normalize"]
    with np.load(root / "build" / "m" / "data" / "data.npz") as arrays:
        expected = arrays["x_test"]
    assert expected.min() == -128 and expected.max() == 127
    inputs = InputFormat(info["normalize"]["method"], tuple(offset.tolist()),
                         tuple(scale.tolist()), tuple(info["classes"]))
    project = write_project(codegen.render(spec("m", inputs)), tmp_path / "c")
    lines = run_check(project, "m", raw, expected)
    assert lines == [f"raw -> int8: 0 mismatches in {len(raw)} samples"] * len(lines)
    assert len(lines) == (3 if shutil.which("arm-none-eabi-gcc") and
                          shutil.which("qemu-system-arm") else 2)
