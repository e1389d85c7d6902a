"""Kernel speed over generated layer shapes, not only the examples' (issue 32).

A seeded generator draws the layer shapes real models use -- conv1d and conv2d with kernels
1..15 per axis (square, 1xK, Kx1 and any KhxKw), stride 1-2, dilation 1-2, padding same or
valid, 1..256 input and output channels (first layers with 1 or 3), dense, depthwise with a
channel multiplier of 1-4, or grouped; spatial sizes 1..128; linear layers 1..2048 wide; max
and average pooling -- and short chains of them (a DS-CNN block, an EMG front end, a 1-D
stack). Each becomes a model in edgebuild's own number format with random integer weights
(`model.weights`, scaled so outputs use the int8 range) and a random known-answer input,
built by `edgebuild build --until kat` through the project's own generated C: the `kat`
stage checks the C against the integer reference on the host and on a Cortex-M4 under QEMU
(bit for bit; a mismatch fails the stage and is reported here as FAILED) and counts every
layer's instructions and estimated cycles (templates/tools/insn_count.c: zero wait states).

Per shape: MACs, instructions and estimated cycles and per MAC, the reference kernels' count,
the code the model links (cnn.c + kernels, from a link map; --code), the path taken (the call
in cnn.c) and, with CMSIS-NN beside the repository (../shared/reference/cmsis-nn, as
benchmarks/cmsis_nn.py builds it; --no-cmsis skips it), ARM's s8 kernel on the same shape
under the same counter. Then the distribution over layers of at least 4,096 MACs: median,
p90 and the worst ten, against the issue's targets (p90 <= 2.0 insn/MAC, worst <= 3.0), and
the shapes where CMSIS-NN takes fewer instructions or cycles.

    python benchmarks/shapes.py [--count N] [--chains N] [--seed S] [--only NAME ...] [--jobs J]
                                [--keep DIR] [--no-cmsis] [--code] [--out PATH]
                                [--plot PNG [--before OLD.json]]
    python benchmarks/shapes.py --from-json OUT.json [--plot PNG [--before OLD.json]]

Writes PATH.json (every row) and PATH.md (default ./shapes); prints the tables. Needs the
README's tools (arm-none-eabi-gcc, qemu-system-arm, gcc for the plugin).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cmsis_nn  # noqa: E402  (benchmarks/cmsis_nn.py: the CMSIS-NN harness)

REPO = Path(__file__).resolve().parent.parent
MIN_MACS = 4096             # the targets count layers of at least this many MACs
TARGET_P90, TARGET_WORST = 2.0, 3.0  # insn/MAC (issue 32)
MAX_MACS = 3_000_000        # keeps a model's QEMU runs (reference kernels too) short
MAX_ACTIVATION = 96 * 1024  # input + output bytes of a layer: inside the default 256 KiB L2
MAX_WEIGHTS = 192 * 1024    # inside the default 1 MiB flash with the code
MAX_WINDOW = 48 * 1024      # an output row's input rows: inside the default 64 KiB L1
CHANNELS = (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256)
SQUARE = (1, 1, 3, 3, 3, 3, 5, 5, 7, 9, 11, 15)


# ---- the generator -------------------------------------------------------------------------

@dataclass(frozen=True)
class Layer:
    """One generated layer: op conv1d / conv2d / linear / pool1d / pool2d. Spatial fields are
    (h, w) pairs; a 1-D layer keeps h = 1 (edgebuild's conv1d takes [C, L])."""

    op: str
    cin: int
    cout: int
    size: tuple[int, int] = (1, 1)       # input (h, w); linear: unused
    kernel: tuple[int, int] = (1, 1)
    stride: tuple[int, int] = (1, 1)
    dilation: tuple[int, int] = (1, 1)
    pad: tuple[int, int] = (0, 0)
    groups: int = 1
    mode: str = ""                       # pooling: max or avg

    @property
    def one_d(self) -> bool:
        return self.op in ("conv1d", "pool1d")

    def out_size(self) -> tuple[int, int]:
        if self.op == "linear":
            return (1, 1)
        return tuple((n + 2 * p - d * (k - 1) - 1) // s + 1 for n, p, d, k, s in zip(
            self.size, self.pad, self.dilation, self.kernel, self.stride, strict=True)
        )  # type: ignore[return-value]

    def macs(self) -> int:
        if self.op == "linear":
            return self.cin * self.cout
        if self.op.startswith("pool"):
            return 0
        oh, ow = self.out_size()
        return self.cout * oh * ow * (self.cin // self.groups) * self.kernel[0] * self.kernel[1]

    def in_shape(self) -> list[int]:
        if self.op == "linear":
            return [self.cin]
        return [self.cin, self.size[1]] if self.one_d else [self.cin, *self.size]

    def activation_bytes(self) -> int:
        oh, ow = self.out_size()
        return math.prod(self.in_shape()) + self.cout * oh * ow

    def window_bytes(self) -> int:
        """The input rows one output row reads (every input channel): the least of the input
        a tile of the layer holds in L1 (a conv's or a pool's)."""
        h, w = self.size
        return self.cin * min(h, self.dilation[0] * (self.kernel[0] - 1) + 1) * w

    def weight_count(self) -> int:
        if self.op == "linear":
            return self.cin * self.cout
        if self.op.startswith("pool"):
            return 0
        return self.cout * (self.cin // self.groups) * self.kernel[0] * self.kernel[1]

    def kind(self) -> str:
        if self.op == "linear" or self.op.startswith("pool"):
            return self.op
        if self.groups == 1:
            return self.op
        if self.groups == self.cin:
            return f"{self.op} depthwise x{self.cout // self.cin}"
        return f"{self.op} grouped g{self.groups}"

    def text(self) -> str:
        """A compact description: 16x48x48 -> 32, k3x3 s2 d1 p1 g16."""
        if self.op == "linear":
            return f"{self.cin} -> {self.cout}"
        size = f"{self.size[1]}" if self.one_d else f"{self.size[0]}x{self.size[1]}"
        axes = (lambda t: f"{t[1]}") if self.one_d else (lambda t: f"{t[0]}x{t[1]}")
        if self.op.startswith("pool"):
            return f"{self.cin}x{size} {self.mode} {axes(self.kernel)} s{axes(self.stride)}"
        return (f"{self.cin}x{size} -> {self.cout} k{axes(self.kernel)} s{axes(self.stride)}"
                f" d{axes(self.dilation)} p{axes(self.pad)}"
                + (f" g{self.groups}" if self.groups > 1 else ""))

    def manifest_layer(self, name: str) -> dict[str, Any]:
        """The layer as the manifest writes it."""
        if self.op == "linear":
            return {"name": name, "op": "linear", "out": self.cout, "act": "relu"}
        pick = (lambda t: t[1]) if self.one_d else list
        if self.op.startswith("pool"):
            return {"name": name, "op": self.op, "mode": self.mode, "size": pick(self.kernel),
                    "stride": pick(self.stride)}
        return {"name": name, "op": self.op, "out": self.cout, "kernel": pick(self.kernel),
                "stride": pick(self.stride), "dilation": pick(self.dilation),
                "pad": pick(self.pad), "groups": self.groups, "act": "relu"}


def _kernel(rng: random.Random, one_d: bool) -> tuple[int, int]:
    """Square (mostly 1-7), 1xK / Kx1 (time series, audio) or any KhxKw (KWS's 10x4)."""
    if one_d:
        return 1, rng.choice((1, 3, 3, 5, 5, 7, 9, 11, 15))
    roll = rng.random()
    if roll < 0.45:
        k = rng.choice(SQUARE)
        return k, k
    if roll < 0.8:
        k = rng.randint(2, 15)
        return (1, k) if rng.random() < 0.5 else (k, 1)
    return rng.randint(1, 15), rng.randint(1, 15)


def _groups(rng: random.Random, cin: int, cout_choice: int) -> tuple[int, int]:
    """(groups, cout): dense, depthwise with multiplier 1-4, or grouped."""
    roll = rng.random()
    if roll < 0.5 or cin == 1:
        return 1, cout_choice
    if roll < 0.8:
        return cin, cin * rng.choice((1, 1, 2, 3, 4))
    divisors = [g for g in (2, 4, 8, 16) if cin % g == 0 and g < cin]
    if not divisors:
        return cin, cin * rng.choice((1, 2))
    g = rng.choice(divisors)
    return g, g * rng.choice((1, 2, 4)) * max(1, cout_choice // (g * 4))


def _conv(rng: random.Random, one_d: bool) -> Layer | None:
    cin = rng.choice((1, 3)) if rng.random() < 0.2 else rng.choice(CHANNELS)
    groups, cout = _groups(rng, cin, rng.choice(CHANNELS))
    kernel = _kernel(rng, one_d)
    stride = (1, 1) if rng.random() < 0.7 else (1 if kernel[0] == 1 else 2, 2)
    dil = (1, 1) if rng.random() < 0.85 else (1 if kernel[0] == 1 else 2, 2)
    if stride != (1, 1):
        dil = (1, 1)
    same = rng.random() < 0.6
    pad = (dil[0] * (kernel[0] - 1) // 2, dil[1] * (kernel[1] - 1) // 2) if same else (0, 0)
    w = int(2 ** rng.uniform(2, 10 if one_d else 7))          # 4..1024 (1-D), 4..128
    h = 1 if one_d else int(2 ** rng.uniform(0, 7))
    size = (h, min(w, 1024 if one_d else 128))
    if max(pad) > 64:
        return None
    layer = Layer("conv1d" if one_d else "conv2d", cin, cout, size, kernel, stride, dil, pad,
                  groups)
    return _fit(layer)


def _fit(layer: Layer) -> Layer | None:
    """Halve the spatial size, then the channels, until the layer's MACs, activations and
    weights fit the budgets; None if it has no output."""
    while True:
        oh, ow = layer.out_size()
        if oh < 1 or ow < 1:
            return None
        if (layer.macs() <= MAX_MACS and layer.activation_bytes() <= MAX_ACTIVATION
                and layer.weight_count() <= MAX_WEIGHTS and layer.window_bytes() <= MAX_WINDOW):
            return layer
        h, w = layer.size
        eff = [d * (k - 1) + 1 - 2 * p for d, k, p in zip(layer.dilation, layer.kernel,
                                                          layer.pad, strict=True)]
        if w // 2 >= max(eff[1], 1) and w >= h:
            layer = replace(layer, size=(h, w // 2))
        elif h // 2 >= max(eff[0], 1):
            layer = replace(layer, size=(h // 2, w))
        elif layer.groups == 1 and layer.cout > 1:
            layer = replace(layer, cout=layer.cout // 2)
        elif layer.groups == 1 and layer.cin > 1:
            layer = replace(layer, cin=layer.cin // 2)
        else:
            return None


def _linear(rng: random.Random) -> Layer | None:
    n_in = int(2 ** rng.uniform(0, 11))
    n_out = int(2 ** rng.uniform(0, 11))
    n_in, n_out = max(1, min(n_in, 2048)), max(1, min(n_out, 2048))
    while n_in * n_out > MAX_WEIGHTS:
        n_in, n_out = (n_in // 2, n_out) if n_in > n_out else (n_in, n_out // 2)
    return Layer("linear", n_in, n_out)


def _pool(rng: random.Random) -> Layer | None:
    one_d = rng.random() < 0.4
    k = rng.choice((2, 2, 3, 4))
    s = k if rng.random() < 0.7 else max(1, k - 1)
    cin = rng.choice(CHANNELS)
    w = int(2 ** rng.uniform(3, 9 if one_d else 7))
    h = 1 if one_d else int(2 ** rng.uniform(3, 7))
    layer = Layer("pool1d" if one_d else "pool2d", cin, cin, (h, w),
                  (1, k) if one_d else (k, k), (1, s) if one_d else (s, s),
                  mode=rng.choice(("max", "avg")))
    return _fit(layer)


def generate(seed: int, count: int) -> list[Layer]:
    """`count` distinct layers, the same for the same seed."""
    rng = random.Random(seed)
    out: list[Layer] = []
    seen: set[Layer] = set()
    while len(out) < count:
        roll = rng.random()
        layer = (_conv(rng, one_d=False) if roll < 0.5 else _conv(rng, one_d=True)
                 if roll < 0.72 else _linear(rng) if roll < 0.9 else _pool(rng))
        if layer is None or (layer.op != "linear" and not layer.op.startswith("pool")
                             and layer.macs() < MIN_MACS and rng.random() < 0.75):
            continue  # few below the counted size: they take a build and count for nothing
        if layer not in seen:
            seen.add(layer)
            out.append(layer)
    return out


def chains(seed: int, count: int) -> list[list[Layer]]:
    """Short chains: a DS-CNN block (conv, depthwise 3x3, pointwise), an EMG front end
    (1xK conv, grouped Kx1 with multiplier 2, average pool, linear) and a 1-D stack (conv1d,
    max pool, conv1d); sizes drawn from the seed."""
    rng = random.Random(seed + 1)
    out: list[list[Layer]] = []
    for i in range(count):
        form = i % 3
        if form == 0:
            c = rng.choice((16, 32, 64))
            h, w = rng.choice(((25, 5), (24, 24), (12, 12), (49, 10)))
            first = Layer("conv2d", rng.choice((1, 3)), c, (h, w), (3, 3), (1, 1), (1, 1), (1, 1))
            dw = Layer("conv2d", c, c, (h, w), (3, 3), (1, 1), (1, 1), (1, 1), c)
            pw = Layer("conv2d", c, c, (h, w))
            out.append([first, dw, pw])
        elif form == 1:
            ch, length, c = rng.choice((8, 14)), rng.choice((100, 200)), rng.choice((4, 8))
            k = rng.choice((7, 11, 15))
            a = Layer("conv2d", 1, c, (ch, length), (1, k), (1, 1), (1, 1), (0, k // 2))
            b = Layer("conv2d", c, 2 * c, (ch, length), (ch, 1), groups=c)
            p = Layer("pool2d", 2 * c, 2 * c, (1, length), (1, 4), (1, 4), mode="avg")
            fc = Layer("linear", 2 * c * (length // 4), rng.choice((5, 9, 12)))
            out.append([a, b, p, fc])
        else:
            c, length = rng.choice((8, 16, 32)), rng.choice((64, 128, 256))
            a = Layer("conv1d", rng.choice((1, 2, 6)), c, (1, length), (1, 5), pad=(0, 2))
            p = Layer("pool1d", c, c, (1, length), (1, 2), (1, 2), mode="max")
            b = Layer("conv1d", c, 2 * c, (1, length // 2), (1, 3), pad=(0, 1))
            out.append([a, p, b])
    return out


# ---- models on disk -------------------------------------------------------------------------

def _scale_exp(layer: Layer) -> int:
    """The weight scale exponent whose shift (7 - s for 8 bits) brings a random sum to about
    +-40: sums of `taps` products of two uniform int8 (std ~74 each)."""
    taps = layer.cin if layer.op == "linear" else \
        (layer.cin // layer.groups) * layer.kernel[0] * layer.kernel[1]
    shift = round(math.log2(max(1.0, math.sqrt(taps) * 74 * 74 / 40)))
    return max(-15, min(15, 7 - shift))


def write_model(root: Path, name: str, layers: list[Layer], samples: int, seed: int) -> None:
    """manifests/<name>.yaml, its weights (.npz) and known-answer input (.npy) under root."""
    import yaml

    rng = np.random.default_rng(seed)
    folder = root / "manifests"
    folder.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {}
    doc_layers = []
    for index, layer in enumerate(layers):
        lname = f"l{index}"
        entry = layer.manifest_layer(lname)
        if layer.op == "linear" and index > 0 and layers[index - 1].op != "linear":
            entry["flatten"] = True
        doc_layers.append(entry)
        if layer.op.startswith("pool"):
            continue
        if layer.op == "linear":
            shape: tuple[int, ...] = (layer.cout, layer.cin)
        elif layer.one_d:
            shape = (layer.cout, layer.cin // layer.groups, layer.kernel[1])
        else:
            shape = (layer.cout, layer.cin // layer.groups, *layer.kernel)
        arrays[f"{lname}.weight"] = rng.integers(-127, 128, size=shape).astype(np.int8)
        arrays[f"{lname}.bits"] = np.array(8)
        arrays[f"{lname}.scale_exp"] = np.array(_scale_exp(layer))
        arrays[f"{lname}.bias"] = rng.integers(-2000, 2001, size=layer.cout).astype(np.int32)
    np.savez(folder / f"{name}.npz", **arrays)  # type: ignore[arg-type]
    np.save(folder / f"{name}_input.npy",
            rng.integers(-128, 128, size=(samples, *layers[0].in_shape())).astype(np.int8))
    doc = {"name": name, "model": {"input": layers[0].in_shape(), "weights": f"{name}.npz",
                                   "layers": doc_layers},
           "target": {"device": "cortex-m4"}, "kat": {"input": f"{name}_input.npy"}}
    header = "# generated by benchmarks/shapes.py: " + " | ".join(x.text() for x in layers)
    (folder / f"{name}.yaml").write_text(header + "\n" + yaml.safe_dump(doc, sort_keys=False))


def build(project: Path, names: list[str], jobs: int) -> str:
    """`edgebuild build --until kat` of the models; its output (a failed model does not
    stop the others: each is read back from its own kat.json). A manifest the tool rejects
    before building (its error names the file: a budget the generated layer does not fit)
    would stop them all: it is left out, reported in the output, and the rest built."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
        "EDGEBUILD_CACHE": os.environ.get("EDGEBUILD_CACHE", str(project / "cache"))}
    log, left = "", list(names)
    while left:
        result = subprocess.run(
            [sys.executable, "-m", "edgebuild", "build", "--until", "kat", "-j", str(jobs),
             *[f"manifests/{n}.yaml" for n in left]],
            cwd=project, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True)
        log += result.stdout + result.stderr
        rejected = set(re.findall(r"^manifests/([\w-]+)\.yaml:\d+:\d+: ", result.stderr,
                                  re.MULTILINE)) & set(left)
        if result.returncode != 2 or not rejected:
            break
        print(f"  rejected, left out: {', '.join(sorted(rejected))}", file=sys.stderr)
        left = [n for n in left if n not in rejected]
    return log


# ---- reading the results --------------------------------------------------------------------

def path_taken(codegen: Path, layer: str) -> str:
    """The kernel cnn.c calls for a layer: its macro (EB_CONV2D_PW, EB_DW_CONV2D_SPEC, ...)
    or, for a tiled layer, the tiling driver (eb_conv2d_tiled, ...)."""
    text = (codegen / "model" / "cnn.c").read_text()
    at = text.find(f"/* {layer}: ")
    if at < 0:
        return "?"
    calls = (m[1] for m in re.finditer(r"\b((?:EB|eb)_[A-Za-z0-9_]+)\(", text[at:])
             if m[1] != "EB_LAYER_MARK")
    return next(calls, "?")


def read_model(project: Path, name: str, layers: list[Layer], cmsis: dict[str, Any] | None,
               code: dict[str, int] | None) -> list[dict[str, Any]]:
    """One row per layer of a built model (or one FAILED row)."""
    target = project / "build" / name
    kat_json = target / "kat" / "kat.json"
    if not kat_json.is_file():
        return [{"model": name, "layer": "-", "shape": " | ".join(x.text() for x in layers),
                 "kind": layers[0].kind(), "status": "FAILED"}]
    m4 = json.loads(kat_json.read_text())["cortex_m4"]
    rows = []
    for index, (layer, run) in enumerate(zip(layers, m4["layers"], strict=True)):
        macs = run["macs"]
        elements = math.prod(layer.out_size()) * layer.cout
        theirs = (cmsis or {}).get(run["layer"])
        rows.append({
            "model": name, "layer": run["layer"], "kind": layer.kind(), "shape": layer.text(),
            "chain": len(layers) > 1, "position": index, "status": "pass", "macs": macs,
            "instructions": run["instructions"], "cycles": run["cycles"],
            "insn_per_mac": cmsis_nn.per_mac(run["instructions"], macs),
            "cycles_per_mac": cmsis_nn.per_mac(run["cycles"], macs),
            "insn_per_output": round(run["instructions"] / elements, 2),
            "reference_insn_per_mac": cmsis_nn.per_mac(run.get("reference_instructions"), macs),
            "path": path_taken(target / "codegen", run["layer"]),
            "code_bytes": m4["code_bytes"],
            "model_code_bytes": None if code is None else code["model_code_bytes"],
            "cmsis_instructions": None if theirs is None else theirs[0],
            "cmsis_cycles": None if theirs is None else theirs[1],
            "cmsis_insn_per_mac": None if theirs is None else cmsis_nn.per_mac(theirs[0], macs),
            "cmsis_cycles_per_mac": None if theirs is None else cmsis_nn.per_mac(theirs[1], macs),
            "spec": asdict(layer)})
    return rows


def run_cmsis(bench: Any, target: Path, work: Path) -> dict[str, Any] | None:
    """CMSIS-NN's (instructions, cycles) per layer of a built model (cmsis_nn.py's harness);
    None when it cannot run the shape (a kernel refuses it, or its scratch is too small)."""
    try:
        fw = cmsis_nn.firmware_for(target)
        return cmsis_nn.run_cmsis(bench, fw, work)
    except SystemExit as exc:  # the harness exits on a failed run: no figure for this shape
        print(f"  CMSIS-NN: {target.name}: {str(exc).splitlines()[0]}", file=sys.stderr)
        return None


# ---- the distribution -----------------------------------------------------------------------

def quantile(values: list[float], q: float) -> float:
    """The q-quantile by linear interpolation (numpy's default)."""
    return float(np.quantile(np.array(values), q))


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median, p90 and worst of insn/MAC and cycles/MAC over passing layers of >= MIN_MACS,
    the worst ten, failures and the shapes above CMSIS-NN."""
    counted = [r for r in rows if r["status"] == "pass" and r["macs"] >= MIN_MACS]
    insn = [r["insn_per_mac"] for r in counted]
    cyc = [r["cycles_per_mac"] for r in counted]
    above = [r for r in counted if r["cmsis_instructions"] is not None and (
        r["instructions"] > r["cmsis_instructions"] or r["cycles"] > r["cmsis_cycles"])]
    worst = sorted(counted, key=lambda r: -r["insn_per_mac"])[:10]
    out: dict[str, Any] = {
        "layers": len(counted), "failed": [r["model"] for r in rows if r["status"] != "pass"],
        "min_macs": MIN_MACS, "target_p90": TARGET_P90, "target_worst": TARGET_WORST,
        "with_cmsis": sum(r["cmsis_instructions"] is not None for r in counted),
        "above_cmsis": [f"{r['model']}/{r['layer']}" for r in above],
        "worst_ten": [f"{r['model']}/{r['layer']}" for r in worst]}
    if counted:
        out.update({"insn_per_mac": {"median": quantile(insn, 0.5), "p90": quantile(insn, 0.9),
                                     "worst": max(insn)},
                    "cycles_per_mac": {"median": quantile(cyc, 0.5), "p90": quantile(cyc, 0.9),
                                       "worst": max(cyc)}})
    return out


def _f(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ("model", "layer", "kind", "shape", "MACs", "insn/MAC", "cyc/MAC", "ref i/MAC",
            "CMSIS i/MAC", "CMSIS c/MAC", "path")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if r["status"] != "pass":
            lines.append(f"| {r['model']} | - | {r['kind']} | {r['shape']} | FAILED |"
                         + " |" * (len(head) - 5))
            continue
        lines.append("| " + " | ".join((
            r["model"], r["layer"], r["kind"], r["shape"], f"{r['macs']:,}",
            _f(r["insn_per_mac"]) if r["macs"] else f"{r['insn_per_output']}/out",
            _f(r["cycles_per_mac"]), _f(r["reference_insn_per_mac"]),
            _f(r["cmsis_insn_per_mac"]), _f(r["cmsis_cycles_per_mac"]), r["path"])) + " |")
    return "\n".join(lines)


def summary_text(s: dict[str, Any], rows: list[dict[str, Any]]) -> str:
    by = {f"{r['model']}/{r['layer']}": r for r in rows if r["status"] == "pass"}
    lines = [f"Layers of >= {s['min_macs']:,} MACs: {s['layers']} "
             f"({s['with_cmsis']} with a CMSIS-NN kernel); failed builds: "
             f"{', '.join(s['failed']) or 'none'}"]
    if "insn_per_mac" in s:
        i, c = s["insn_per_mac"], s["cycles_per_mac"]
        lines += [f"insn/MAC:   median {i['median']:.3f}  p90 {i['p90']:.3f} (target <= "
                  f"{TARGET_P90})  worst {i['worst']:.3f} (target <= {TARGET_WORST})",
                  f"cycles/MAC: median {c['median']:.3f}  p90 {c['p90']:.3f}  worst "
                  f"{c['worst']:.3f}",
                  f"above CMSIS-NN (instructions or cycles): {len(s['above_cmsis'])}"
                  + (": " + ", ".join(s["above_cmsis"]) if s["above_cmsis"] else ""),
                  "worst ten (insn/MAC, cycles/MAC, path, shape):"]
        lines += [f"  {key:12} {by[key]['insn_per_mac']:7.3f} {by[key]['cycles_per_mac']:7.3f}"
                  f"  {by[key]['path']:22} {by[key]['kind']}: {by[key]['shape']}"
                  for key in s["worst_ten"]]
    return "\n".join(lines)


def counted_insn(rows: list[dict[str, Any]]) -> list[float]:
    return [r["insn_per_mac"] for r in rows if r["status"] == "pass" and r["macs"] >= MIN_MACS]


def plot(rows: list[dict[str, Any]], path: Path, before: list[dict[str, Any]] | None = None
         ) -> None:
    """The cumulative distribution of insn/MAC over the counted layers (and of an earlier
    run's, `before`), with the targets marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 3.4), dpi=100)
    for label, data, color in (("before", before, "#b0b0b0"), ("now", rows, "#4a7ab8")):
        if data is None:
            continue
        values = sorted(counted_insn(data))
        ax.step(values, [(i + 1) / len(values) for i in range(len(values))], where="post",
                color=color, label=f"{label} (median {quantile(values, 0.5):.2f}, p90 "
                                   f"{quantile(values, 0.9):.2f})")
    ax.axvline(TARGET_P90, color="#c33", linestyle="--", label=f"p90 target {TARGET_P90}")
    ax.axvline(TARGET_WORST, color="#933", linestyle=":", label=f"worst target {TARGET_WORST}")
    ax.axhline(0.9, color="#ddd", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("Cortex-M4 instructions per MAC, one layer (log scale)")
    ax.set_ylabel("fraction of layers")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


# ---- main -------------------------------------------------------------------------------------

def models_of(seed: int, count: int, n_chains: int) -> dict[str, list[Layer]]:
    models = {f"s{i:03d}": [layer] for i, layer in enumerate(generate(seed, count))}
    models.update({f"c{i:02d}": chain for i, chain in enumerate(chains(seed, n_chains))})
    return models


def measure(project: Path, models: dict[str, list[Layer]], args: argparse.Namespace
            ) -> list[dict[str, Any]]:
    for index, (name, layers) in enumerate(models.items()):
        write_model(project, name, layers, args.samples, args.seed * 1000 + index)
    log = build(project, list(models), args.jobs)
    (project / "build.log").write_text(log)
    bench = None
    if not args.no_cmsis:
        bench = cmsis_nn.prepare(cmsis_nn.default_cmsis(), project / "cmsis")
    rows: list[dict[str, Any]] = []
    for name, layers in models.items():
        target = project / "build" / name
        built = (target / "kat" / "kat.json").is_file()
        theirs = run_cmsis(bench, target, project / "cmsis" / name) if bench and built else None
        code = None
        if args.code and built:
            import mlperf_tiny

            code = mlperf_tiny.codegen_code(target / "codegen", project / "code" / name)
        rows += read_model(project, name, layers, theirs, code)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=80, help="single-layer shapes (80)")
    parser.add_argument("--chains", type=int, default=6, help="short chains (6)")
    parser.add_argument("--seed", type=int, default=32)
    parser.add_argument("--samples", type=int, default=1, help="known-answer samples per model")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--keep", type=Path, help="build in this directory and keep it")
    parser.add_argument("--no-cmsis", action="store_true", help="leave out CMSIS-NN")
    parser.add_argument("--code", action="store_true",
                        help="also link each model with a map: the code it links (slower)")
    parser.add_argument("--out", type=Path, default=Path("shapes"),
                        help="write OUT.json and OUT.md (default: ./shapes)")
    parser.add_argument("--plot", type=Path, help="write the distribution of insn/MAC (PNG)")
    parser.add_argument("--before", type=Path,
                        help="an earlier run's OUT.json to draw beside (with --plot)")
    parser.add_argument("--only", nargs="+", metavar="NAME",
                        help="measure only these of the drawn models (s010 c04 ...)")
    parser.add_argument("--from-json", type=Path,
                        help="measure nothing: print and plot this earlier run's OUT.json")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    if args.from_json is not None:
        rows = json.loads(args.from_json.read_text())["rows"]
    else:
        models = models_of(args.seed, args.count, args.chains)
        if args.only:
            unknown = sorted(set(args.only) - set(models))
            if unknown:
                parser.error(f"--only: no drawn model {', '.join(unknown)} "
                             f"(drawn: s000..s{args.count - 1:03d}, c00..c{args.chains - 1:02d})")
            models = {name: models[name] for name in args.only}
        with tempfile.TemporaryDirectory(prefix="edgebuild-shapes-") as temp:
            project = args.keep or Path(temp)
            project.mkdir(parents=True, exist_ok=True)
            rows = measure(project, models, args)
    s = summary(rows)
    print(table(rows))
    print()
    print(summary_text(s, rows))
    if args.from_json is None:
        args.out.with_suffix(".json").write_text(json.dumps({"summary": s, "rows": rows},
                                                            indent=1) + "\n")
        args.out.with_suffix(".md").write_text(table(rows) + "\n\n```\n" +
                                               summary_text(s, rows) + "\n```\n")
    if args.plot:
        before = json.loads(args.before.read_text())["rows"] if args.before else None
        plot(rows, args.plot, before)
    return 1 if s["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
