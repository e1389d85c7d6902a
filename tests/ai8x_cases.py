"""The izer corpus (tests/data/ai8x/cases/): networks run through the vendor's synthesis tool
("izer", ai8xize.py) with deterministic random weights and inputs, and the accelerator
program it generated for each, as the canonical form of `ai8x_program.py`. Made by
benchmarks/izer_corpus.py (which needs izer; CI does not): this module needs only numpy and
torch, so a test can rebuild every case's inputs and compare a generator's program with
izer's.

A case directory holds:

- `network.yaml`: the network description izer read (`--config-file`);
- `case.json`: the device, the seed, the input shape, izer's extra command-line options
  (`izer_options`, e.g. `--fifo` for a network whose first layer streams), and per layer with weights (in the
  order izer binds them) its name, weight shape, weight width, whether it has a bias, and its
  `output_shift`; `digest`: sha256 of the regenerated arrays (see `digest`);
- `program.json.gz`: izer's program, reduced by ai8x_program.py (compact JSON, gzipped:
  the same dict `ai8x_program.py PROJECT_DIR` prints; a kernel image, input or expected
  output of more than KERNEL_WORDS_STORED words as its digest). Compare another generator's
  with `compare`.

The weights and input are not stored: `generate` makes them again from the seed (the
recipe below), `write_checkpoint` / `write_input` write them as izer and `edgebuild
import-ai8x` read them (the checkpoint through edgebuild's own exporter). Recipe, with
`rng = numpy.random.default_rng(seed)`, layer by layer in order:
weights `rng.integers(-2**(bits-1), 2**(bits-1), shape)`; then, for a layer with a bias,
`rng.integers(-128, 128, out_channels)` (shape[0], a transposed convolution's
`shape[1]`: case.json `transposed: true`; the 8-bit value the device adds, stored raw as
`b * 2**(bits-1)`); after all layers the input `rng.integers(-128, 128, input_shape)`.

Ties (optional, per layer in case.json): `same_weights_as: k` makes the layer's weights a
copy of layer k's (k earlier, in the same order; values within this layer's width, in
this layer's shape: the same number of weights), `same_bias_as: k` its bias a copy of layer k's 8-bit bias. A tied array draws
nothing from `rng`. Ties make networks whose tensors izer stores once (its deduplication:
equal kernels of equal width on the same processors share kernel memory, equal biases share
bias memory), which random draws never do. Without ties a case regenerates as before.

Use (the generator's test):

    @pytest.mark.parametrize("name", ai8x_cases.case_names())
    def test_program_is_izers(tmp_path, name):
        case = ai8x_cases.load_case(name)
        checkpoint, sample = ai8x_cases.write_inputs(case, tmp_path)
        ...  # import-ai8x case.network with checkpoint and sample (--device case.device),
        ...  # build, then reduce the generated project with the program reader and
        assert ai8x_cases.compare(ai8x_cases.expected_program(case), program) == []
"""

from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CASES = Path(__file__).resolve().parent / "data" / "ai8x" / "cases"


@dataclass(frozen=True)
class LayerRecipe:
    """One layer with weights, as izer binds it (position = order in the checkpoint)."""

    name: str
    shape: tuple[int, ...]  # PyTorch's weight shape: (out, in, kh, kw), (out, in, k), (out, in)
    bits: int  # 1, 2, 4 or 8
    bias: bool
    output_shift: int
    same_weights_as: int | None = None  # a copy of that earlier layer's weights
    same_bias_as: int | None = None  # a copy of that earlier layer's bias
    transposed: bool = False  # a transposed convolution: shape (in, out, kh, kw)

    @property
    def out_channels(self) -> int:
        """Output channels, the bias length: PyTorch stores a transposed convolution's
        weight with the input channels first."""
        return self.shape[1] if self.transposed else self.shape[0]


@dataclass(frozen=True)
class Case:
    name: str
    directory: Path
    device: str  # "MAX78000" or "MAX78002" (izer's --device spelling)
    seed: int
    input_shape: tuple[int, ...]
    layers: tuple[LayerRecipe, ...]
    digest: str  # of the regenerated arrays; the corpus test checks it
    source: str  # where the network comes from (a generator's kind or a vendor file)
    options: tuple[str, ...] = ()  # izer command-line options beyond the usual (`--fifo`)

    @property
    def network(self) -> Path:
        return self.directory / "network.yaml"


def case_names() -> list[str]:
    """Every case in the corpus, sorted."""
    return sorted(p.parent.name for p in CASES.glob("*/case.json"))


def load_case(name: str, root: Path = CASES) -> Case:
    directory = root / name
    data = json.loads((directory / "case.json").read_text())
    layers = tuple(LayerRecipe(row["name"], tuple(row["shape"]), int(row["bits"]),
                               bool(row["bias"]), int(row["output_shift"]),
                               row.get("same_weights_as"), row.get("same_bias_as"),
                               bool(row.get("transposed", False)))
                   for row in data["layers"])
    return Case(name, directory, data["device"], int(data["seed"]), tuple(data["input_shape"]),
                layers, data.get("digest", ""), data.get("source", ""),
                tuple(data.get("izer_options", ())))


def case_json(case: Case) -> str:
    """`case.json`'s text (what load_case reads back)."""
    return json.dumps({
        "device": case.device, "seed": case.seed, "input_shape": list(case.input_shape),
        "source": case.source, "digest": case.digest,
        **({"izer_options": list(case.options)} if case.options else {}),
        "layers": [_layer_json(r) for r in case.layers]}, indent=1) + "\n"


def _layer_json(r: LayerRecipe) -> dict[str, Any]:
    """One layer's row; the ties only where set (an untied case's text is unchanged)."""
    row: dict[str, Any] = {"name": r.name, "shape": list(r.shape), "bits": r.bits,
                           "bias": r.bias, "output_shift": r.output_shift}
    for key in ("same_weights_as", "same_bias_as"):
        if getattr(r, key) is not None:
            row[key] = getattr(r, key)
    if r.transposed:
        row["transposed"] = True
    return row


def generate(case: Case) -> tuple[list[dict[str, Any]], np.ndarray]:
    """The case's layers (`name`, `weight`, `bias8` or None, `bits`, `output_shift`) and its
    input (int64, `input_shape`), by the recipe in the module docstring."""
    rng = np.random.default_rng(case.seed)
    layers: list[dict[str, Any]] = []
    for recipe in case.layers:
        half = 1 << (recipe.bits - 1)
        if recipe.same_weights_as is None:
            weight = rng.integers(-half, half, recipe.shape).astype(np.int64)
        else:
            weight = layers[recipe.same_weights_as]["weight"].reshape(recipe.shape).copy()
            assert -half <= weight.min() and weight.max() < half
        bias = None
        if recipe.bias and recipe.same_bias_as is None:
            bias = rng.integers(-128, 128, recipe.out_channels).astype(np.int64)
        elif recipe.bias:
            bias = layers[recipe.same_bias_as]["bias8"].copy()
            assert bias.shape == (recipe.out_channels,)
        layers.append({"name": recipe.name, "weight": weight, "bias8": bias,
                       "bits": recipe.bits, "output_shift": recipe.output_shift})
    sample = rng.integers(-128, 128, case.input_shape).astype(np.int64)
    return layers, sample


def digest(layers: list[dict[str, Any]], sample: np.ndarray) -> str:
    """sha256 over every generated array (shape, then int64 little-endian bytes) in order."""
    h = hashlib.sha256()
    arrays = [a for layer in layers for a in (layer["weight"], layer["bias8"]) if a is not None]
    for array in [*arrays, sample]:
        h.update(repr(tuple(array.shape)).encode())
        h.update(np.ascontiguousarray(array, dtype="<i8").tobytes())
    return h.hexdigest()


def checkpoint_bytes(case: Case, layers: list[dict[str, Any]]) -> bytes:
    """The quantized checkpoint izer and import-ai8x read, written by edgebuild's exporter
    (the arch is the description's, as izer's loader requires)."""
    import yaml

    from edgebuild.targets.max7800x.network.checkpoint import CheckpointLayer
    from edgebuild.targets.max7800x.network.checkpoint import checkpoint_bytes as save

    arch = str(yaml.safe_load(case.network.read_text())["arch"])
    return save(arch, [CheckpointLayer(
        layer["name"], f"{layer['name']}.op.weight", layer["weight"],
        None if layer["bias8"] is None else layer["bias8"] * (1 << (layer["bits"] - 1)),
        None if layer["bias8"] is None else f"{layer['name']}.op.bias",
        layer["output_shift"], layer["bits"]) for layer in layers])


def write_inputs(case: Case, directory: Path) -> tuple[Path, Path]:
    """Write `checkpoint-q.pth.tar` and `input.npy` (int64, as izer's --sample-input wants)
    into `directory`; returns their paths."""
    layers, sample = generate(case)
    directory.mkdir(parents=True, exist_ok=True)
    checkpoint = directory / "checkpoint-q.pth.tar"
    checkpoint.write_bytes(checkpoint_bytes(case, layers))
    sample_path = directory / "input.npy"
    np.save(sample_path, sample)
    return checkpoint, sample_path


def expected_program(case: Case) -> dict[str, Any]:
    """izer's program for the case: the dict `ai8x_program.py PROJECT_DIR` prints, except
    that a large kernel image is stored as its digest (see `stored_program`): then `kernels`
    is empty and `kernels_digest` holds {"sha256", "words"}. `compare` handles both."""
    with gzip.open(case.directory / "program.json.gz", "rt", encoding="utf-8") as file:
        result: dict[str, Any] = json.load(file)
    return result


# Kernel images, inputs and expected outputs larger than this (words) are stored as their
# digest, so that the vendor's networks (10^5 random weights, the CamVid UNet's 48x88x88
# input and 64x88x88 output) stay KBs in the repository; the registers, start sequence and
# bias are always stored in full.
KERNEL_WORDS_STORED = 4096
DIGESTED = ("kernels", "input", "expected")


def kernels_digest(values: dict[str, Any]) -> dict[str, Any]:
    """sha256 of a part (kernel image, input or expected output) in a canonical form:
    sorted `address value` lines (an expected word's value and mask joined by a space)."""
    text = "".join(f"{address} {_text(values[address])}\n" for address in sorted(values))
    return {"sha256": hashlib.sha256(text.encode()).hexdigest(), "words": len(values)}


def _text(value: Any) -> str:
    return " ".join(value) if isinstance(value, list | tuple) else str(value)


def stored_program(program: dict[str, Any]) -> dict[str, Any]:
    """The program as the corpus stores it: a part of more than KERNEL_WORDS_STORED words
    empty, with its digest as `<part>_digest`."""
    stored = dict(program)
    for part in DIGESTED:
        if len(program.get(part, {})) > KERNEL_WORDS_STORED:
            stored[part] = {}
            stored[f"{part}_digest"] = kernels_digest(program[part])
    return stored


def compare(expected: dict[str, Any], actual: dict[str, Any]) -> list[str]:
    """The differences between izer's stored program and another generator's (full
    canonical form), as ai8x_program.py --compare lists them; empty: identical."""
    diffs = []
    for part in ("registers", "kernels", "bias", "input", "expected"):
        x, y = expected.get(part, {}), actual.get(part, {})
        digest = expected.get(f"{part}_digest")
        if digest:
            if kernels_digest(y) != digest:
                diffs.append(f"{part}: {kernels_digest(y)} != {digest}")
            continue
        diffs += [f"{part} {key}: {x.get(key)} != {y.get(key)}"
                  for key in sorted(set(x) | set(y)) if x.get(key) != y.get(key)]
    if expected.get("start") != actual.get("start"):
        diffs.append(f"start: {expected.get('start')} != {actual.get('start')}")
    return diffs


def program_gz(program: dict[str, Any]) -> bytes:
    """`program.json.gz`'s bytes for izer's full program (stored_program of it;
    deterministic: sorted keys, no timestamp)."""
    text = json.dumps(stored_program(program), sort_keys=True, separators=(",", ":")) + "\n"
    return gzip.compress(text.encode("utf-8"), mtime=0)
