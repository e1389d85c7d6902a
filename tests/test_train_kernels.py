"""The float32 training kernels (templates/train/eb_train.c) against torch: forward values
from torch.nn.functional, gradients from torch.autograd, optimizer steps from torch.optim
(single-tensor implementations). The kernels are compiled once with gcc into a shared library
under tmp and called through ctypes.

Tolerance: relative 1e-5 (of each tensor's largest magnitude). Float32 summation order is the
only difference allowed: the C kernels sum in plain loop order, torch blocks and vectorizes.

Every array reaches C inside a guarded buffer (SENTINEL values on both sides) and is checked
after every call: outputs must not be written outside their bounds, inputs not at all.
Gradient buffers start from random values, not zeros, so each backward test also checks the
accumulate rule (grad += contribution) of eb_train.h."""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from kernel_abi import layout_probe

from edgebuild.core import numerics
from edgebuild.core.geometry import Plane
from edgebuild.ondevice import tiling

TRAIN = Path(__file__).resolve().parent.parent / "templates" / "train"
GCC = shutil.which("gcc")
ARM_GCC = shutil.which("arm-none-eabi-gcc")
WARN_FLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
              "-DEB_STANDALONE"]  # the bare training library: plain names (eb_train.h)
M4_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
LIBM_ALLOWED = {"expf", "logf", "sqrtf", "fabsf"}

pytestmark = pytest.mark.skipif(
    GCC is None, reason="gcc is not on PATH: the training kernel tests compile eb_train.c")

SEED = 20240715
CASES = 25  # random configurations per kernel kind
RTOL = 1e-5
GUARD = 8
SENTINEL = np.float32(-31415.5)
ACT = {"none": 0, "relu": 1, "abs": 2, "clamp": 4, "relu_clamp": 5, "abs_clamp": 6}
POOL_MODE = {"max": 0, "avg": 1}

PF = ctypes.POINTER(ctypes.c_float)
CONV_FIELDS = ("n", "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w",
               "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups")
POOL_FIELDS = ("n", "c", "in_h", "in_w", "out_h", "out_w", "k_h", "k_w", "stride_h",
               "stride_w", "mode")


class Conv(ctypes.Structure):
    """Mirror of ebt_conv (eb_train.h): all int."""

    _fields_ = [(name, ctypes.c_int) for name in CONV_FIELDS]


class Pool(ctypes.Structure):
    """Mirror of ebt_pool (eb_train.h): all int."""

    _fields_ = [(name, ctypes.c_int) for name in POOL_FIELDS]


class Tile(ctypes.Structure):
    """Mirror of ebt_tile (eb_train_tiles.h)."""

    _fields_ = [("rows", ctypes.c_int), ("channels", ctypes.c_int)]


STRUCTS = {"conv": ("ebt_conv", Conv), "pool": ("ebt_pool", Pool), "tile": ("ebt_tile", Tile)}
INT, FL, PC, PP = ctypes.c_int, ctypes.c_float, ctypes.POINTER(Conv), ctypes.POINTER(Pool)
PT = ctypes.POINTER(Tile)
SIGNATURES = {
    "ebt_conv_forward_tiled": (None, [PC, PT, PF, PF, PF, PF, PF]),
    "ebt_conv_backward_input_tiled": (None, [PC, PT, PF, PF, PF, PF]),
    "ebt_conv_backward_weight_tiled": (None, [PC, PT, PF, PF, PF, PF, PF]),
    "ebt_pool_forward_tiled": (None, [PP, PT, PF, PF, PF]),
    "ebt_pool_backward_tiled": (None, [PP, PT, PF, PF, PF, PF]),
    "ebt_conv_forward": (None, [PC, PF, PF, PF, PF]),
    "ebt_conv_backward_input": (None, [PC, PF, PF, PF]),
    "ebt_conv_backward_weight": (None, [PC, PF, PF, PF, INT, INT]),
    "ebt_conv_backward_bias": (None, [PC, PF, PF]),
    "ebt_pool_forward": (None, [PP, PF, PF]),
    "ebt_pool_backward": (None, [PP, PF, PF, PF]),
    "ebt_act_forward": (None, [INT, INT, PF, PF]),
    "ebt_act_backward": (None, [INT, INT, PF, PF, PF]),
    "ebt_accumulate": (None, [INT, PF, PF]),
    "ebt_copy": (None, [PF, PF, INT]),
    "ebt_zero": (None, [PF, INT]),
    "ebt_add_forward": (None, [INT, PF, PF, PF]),
    "ebt_concat_forward": (None, [INT, INT, ctypes.POINTER(INT), ctypes.POINTER(PF), PF]),
    "ebt_concat_backward": (None, [INT, INT, ctypes.POINTER(INT), PF, ctypes.POINTER(PF)]),
    "ebt_softmax_cross_entropy": (FL, [INT, INT, PF, ctypes.POINTER(ctypes.c_int32), PF]),
    "ebt_mse": (FL, [INT, INT, PF, PF, PF]),
    "ebt_sgd_step": (None, [INT, PF, PF, PF, FL, FL]),
    "ebt_adam_step": (None, [INT, PF, PF, PF, PF, FL, FL, FL, FL, INT]),
}


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_train")
    probe = build / "ebt_probe.c"
    probe.write_text("\n".join(["#include <stddef.h>", '#include "eb_train_tiles.h"',
                                *layout_probe(STRUCTS, "ebt_test")]) + "\n")
    shared = build / "libeb_train.so"
    result = subprocess.run(
        [GCC, *WARN_FLAGS, "-shared", "-fPIC", f"-I{TRAIN}", str(TRAIN / "eb_train.c"),
         str(TRAIN / "eb_train_tiles.c"), str(probe), "-lm", "-o", str(shared)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    for name, (restype, argtypes) in SIGNATURES.items():
        getattr(so, name).restype = restype
        getattr(so, name).argtypes = argtypes
    return so


# ---- guarded buffers -------------------------------------------------------------------

class Buf:
    """A float32 array between two runs of SENTINEL; `ptr` points at the array. An input
    (writable=False) must come back bit for bit unchanged, guards included."""

    def __init__(self, values, writable: bool = False):
        values = np.asarray(values, dtype=np.float32)
        self.shape = values.shape
        self.big = np.full(values.size + 2 * GUARD, SENTINEL, dtype=np.float32)
        self.big[GUARD:GUARD + values.size] = values.reshape(-1)
        self.before = None if writable else self.big.copy()

    @property
    def ptr(self):
        return self.big[GUARD:].ctypes.data_as(PF)

    def check(self) -> None:
        guards = np.concatenate([self.big[:GUARD], self.big[-GUARD:]])
        assert (guards == SENTINEL).all(), "a kernel wrote outside its buffer"
        if self.before is not None:
            assert (self.big.view(np.uint32) == self.before.view(np.uint32)).all(), \
                "a kernel wrote into an input"

    def array(self) -> np.ndarray:
        self.check()
        return self.big[GUARD:-GUARD].reshape(self.shape).copy()


def out(shape_or_values) -> Buf:
    """A writable buffer: zeros of a shape, or initial values (a gradient to accumulate into)."""
    if isinstance(shape_or_values, tuple):
        return Buf(np.zeros(shape_or_values, np.float32), writable=True)
    return Buf(shape_or_values, writable=True)


def call(fn, *args):
    """fn(*args) with each Buf (or list of Bufs: a pointer table) passed by pointer; every
    Buf's guards (and every input's contents) are checked afterwards."""
    bufs = [b for a in args for b in (a if isinstance(a, list) else [a]) if isinstance(b, Buf)]
    c_args = [(PF * len(a))(*(b.ptr for b in a)) if isinstance(a, list)
              else a.ptr if isinstance(a, Buf) else a for a in args]
    result = fn(*c_args)
    for b in bufs:
        b.check()
    return result


def assert_close(got, want, what: str = "") -> None:
    want = np.asarray(want, dtype=np.float32)
    scale = float(np.abs(want).max()) if want.size else 0.0
    np.testing.assert_allclose(np.asarray(got).reshape(want.shape), want, rtol=RTOL,
                               atol=RTOL * scale, err_msg=what)


def rng_for(kind: str, index: int) -> np.random.Generator:
    return np.random.default_rng([SEED, sum(map(ord, kind)), index])


def normal(rng, shape, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def int8_like(rng, shape, high: int = 3) -> np.ndarray:
    """Values k/128 with k in [-high, high]: what int8 activations look like, full of ties."""
    return (rng.integers(-high, high + 1, size=shape) / 128).astype(np.float32)


def leaf(a: np.ndarray) -> torch.Tensor:
    return torch.tensor(a, dtype=torch.float32, requires_grad=True)


# ---- the struct layout -----------------------------------------------------------------

@pytest.mark.parametrize("key", sorted(STRUCTS))
def test_struct_layout_matches_header(lib, key):
    _, struct = STRUCTS[key]
    assert ctypes.sizeof(struct) == getattr(lib, f"ebt_test_sizeof_{key}")()
    for field, _ in struct._fields_:
        assert getattr(struct, field).offset == \
            getattr(lib, f"ebt_test_offsetof_{key}_{field}")(), field


# ---- convolution -----------------------------------------------------------------------

def conv_out(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def groups_and_out_c(rng, in_c: int, layout: str) -> tuple[int, int]:
    if layout == "dense":
        return 1, int(rng.integers(1, 9))
    if layout == "depthwise":
        return in_c, in_c * int(rng.integers(1, 3))
    groups = int(rng.choice([d for d in range(1, in_c + 1) if in_c % d == 0]))
    return groups, groups * int(rng.integers(1, 4))


ONE_BY_ONE = {"k_h": 1, "k_w": 1, "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0,
              "dil_h": 1, "dil_w": 1}


def linear_config(rng, n: int, in_c: int) -> dict:
    return {"n": n, "in_c": int(rng.integers(1, 40)), "in_h": 1, "in_w": 1,
            "out_c": int(rng.integers(1, 12)), "out_h": 1, "out_w": 1, "groups": 1,
            **ONE_BY_ONE}


def column_config(rng, n: int, in_c: int) -> dict:
    """Kx1 kernels (SpeechNet's 14x1 across electrodes): whole rows."""
    in_h = int(rng.integers(2, 15))
    cfg = {"n": n, "in_c": in_c, "out_c": in_c * int(rng.integers(1, 3)), "groups": in_c,
           **ONE_BY_ONE, "in_h": in_h, "in_w": int(rng.integers(2, 40)),
           "k_h": int(rng.integers(2, in_h + 1)), "pad_h": int(rng.integers(0, 2)),
           "dil_h": int(rng.integers(1, 3)), "stride_w": int(rng.integers(1, 3))}
    if rng.random() < 0.5:  # dense across the channels
        cfg.update(groups=1, out_c=int(rng.integers(1, 5)))
    cfg["out_h"] = conv_out(*(cfg[f] for f in ("in_h", "k_h", "stride_h", "pad_h", "dil_h")))
    cfg["out_w"] = conv_out(*(cfg[f] for f in ("in_w", "k_w", "stride_w", "pad_w", "dil_w")))
    if cfg["out_h"] < 1:
        cfg.update(pad_h=cfg["k_h"], out_h=conv_out(in_h, cfg["k_h"], 1, cfg["k_h"],
                                                     cfg["dil_h"]))
    return cfg


def lengthwise_config(rng, n: int, in_c: int) -> dict:
    """conv1d as the training code lays it out: along the rows, one column wide."""
    k_h = int(rng.integers(1, 16))
    cfg = {"n": n, "in_c": in_c, "out_c": int(rng.integers(1, 5)), "groups": 1, **ONE_BY_ONE,
           "in_h": int(rng.integers(k_h, 80)), "in_w": 1, "k_h": k_h,
           "stride_h": int(rng.integers(1, 3)), "pad_h": int(rng.integers(0, k_h // 2 + 1)),
           "dil_h": 1 if k_h * 2 > 80 else int(rng.integers(1, 3))}
    if rng.random() < 0.5:  # depthwise with a multiplier
        cfg.update(groups=in_c, out_c=in_c * int(rng.integers(1, 3)))
    cfg["out_h"] = conv_out(*(cfg[f] for f in ("in_h", "k_h", "stride_h", "pad_h", "dil_h")))
    cfg["out_w"] = 1
    if cfg["out_h"] < 1:
        cfg.update(dil_h=1, out_h=conv_out(cfg["in_h"], k_h, cfg["stride_h"], cfg["pad_h"], 1))
    return cfg


def long_config(rng, n: int, in_c: int) -> dict:
    """Rows long enough for the blocks of 8 and groups of 8 taps."""
    k_w = int(rng.integers(3, 16))
    cfg = {"n": n, "in_c": in_c, "out_c": int(rng.integers(1, 5)), "groups": 1, **ONE_BY_ONE,
           "in_h": 1, "in_w": int(rng.integers(k_w + 8, 80)), "k_w": k_w,
           "stride_w": int(rng.integers(1, 3)), "pad_w": int(rng.integers(0, k_w // 2 + 1)),
           "dil_w": int(rng.integers(1, 3))}
    if rng.random() < 0.5:  # depthwise with a multiplier, as SpeechNet's blocks
        cfg.update(groups=in_c, out_c=in_c * int(rng.integers(1, 3)))
    cfg["out_w"] = conv_out(*(cfg[f] for f in ("in_w", "k_w", "stride_w", "pad_w", "dil_w")))
    cfg["out_h"] = 1
    return cfg


SHAPED_CONFIGS = {"linear": linear_config, "column": column_config,
                  "lengthwise": lengthwise_config, "long": long_config}


def conv_config(rng, kind: str) -> dict:
    """ebt_conv fields for kind conv1d / conv2d / grouped (conv2d) / linear / long (conv1d
    on rows of 11 to 79 with kernels of 3 to 15) / column (conv2d with a Kx1 kernel) /
    lengthwise (conv1d along the rows, in_w = k_w = 1: how the generated code lays it out)."""
    n, in_c = int(rng.integers(1, 5)), int(rng.integers(1, 9))
    if kind in SHAPED_CONFIGS:
        return SHAPED_CONFIGS[kind](rng, n, in_c)
    layout = str(rng.choice(["depthwise", "grouped"] if kind == "grouped"
                            else ["dense", "dense", "depthwise", "grouped"]))
    groups, out_c = groups_and_out_c(rng, in_c, layout)
    while True:
        cfg = {"n": n, "in_c": in_c, "out_c": out_c, "groups": groups, **ONE_BY_ONE,
               "in_h": 1, "in_w": int(rng.integers(1, 14)),
               "k_w": int(rng.integers(1, 6)), "stride_w": int(rng.integers(1, 4)),
               "pad_w": int(rng.integers(0, 3)), "dil_w": int(rng.integers(1, 3))}
        if kind != "conv1d":
            cfg.update(in_h=int(rng.integers(1, 12)), k_h=int(rng.integers(1, 5)),
                       stride_h=int(rng.integers(1, 4)), pad_h=int(rng.integers(0, 3)),
                       dil_h=int(rng.integers(1, 3)))
        cfg["out_h"] = conv_out(*(cfg[f] for f in ("in_h", "k_h", "stride_h", "pad_h", "dil_h")))
        cfg["out_w"] = conv_out(*(cfg[f] for f in ("in_w", "k_w", "stride_w", "pad_w", "dil_w")))
        if cfg["out_h"] >= 1 and cfg["out_w"] >= 1:
            return cfg


def conv_shapes(kind: str, cfg: dict) -> tuple[tuple, tuple, tuple]:
    """torch shapes of x, w, y; their C layouts are the same memory."""
    n, in_c, out_c, in_g = cfg["n"], cfg["in_c"], cfg["out_c"], cfg["in_c"] // cfg["groups"]
    if kind == "linear":
        return (n, in_c), (out_c, in_c), (n, out_c)
    if kind in ("conv1d", "long"):
        return (n, in_c, cfg["in_w"]), (out_c, in_g, cfg["k_w"]), (n, out_c, cfg["out_w"])
    return ((n, in_c, cfg["in_h"], cfg["in_w"]), (out_c, in_g, cfg["k_h"], cfg["k_w"]),
            (n, out_c, cfg["out_h"], cfg["out_w"]))


def torch_conv(kind: str, cfg: dict, x, w, b):
    if kind == "linear":
        return F.linear(x, w, b)
    if kind in ("conv1d", "long"):
        return F.conv1d(x, w, b, cfg["stride_w"], cfg["pad_w"], cfg["dil_w"], cfg["groups"])
    return F.conv2d(x, w, b, (cfg["stride_h"], cfg["stride_w"]), (cfg["pad_h"], cfg["pad_w"]),
                    (cfg["dil_h"], cfg["dil_w"]), cfg["groups"])


def conv_data(rng, kind: str, cfg: dict) -> dict:
    x_shape, w_shape, y_shape = conv_shapes(kind, cfg)
    return {"x": normal(rng, x_shape), "w": normal(rng, w_shape, 0.5),
            "b": None if rng.random() < 0.3 else normal(rng, (cfg["out_c"],)),
            "dy": normal(rng, y_shape)}


def c_conv_forward(lib, cfg: dict, x, w, b, y_shape) -> np.ndarray:
    y = out(y_shape)
    call(lib.ebt_conv_forward, ctypes.byref(Conv(**cfg)), Buf(x), Buf(w),
         None if b is None else Buf(b), y)
    return y.array()


def c_backward_input(lib, cfg: dict, dy, w, dx_init) -> np.ndarray:
    dx = out(dx_init)
    call(lib.ebt_conv_backward_input, ctypes.byref(Conv(**cfg)), Buf(dy), Buf(w), dx)
    return dx.array()


def c_backward_weight(lib, cfg: dict, dy, x, dw_init, tiles) -> np.ndarray:
    """dw after one ebt_conv_backward_weight call per (row0, row1) in tiles."""
    dw = out(dw_init)
    for row0, row1 in tiles:
        call(lib.ebt_conv_backward_weight, ctypes.byref(Conv(**cfg)), Buf(dy), Buf(x), dw,
             row0, row1)
    return dw.array()


def c_backward_bias(lib, cfg: dict, dy, db_init) -> np.ndarray:
    db = out(db_init)
    call(lib.ebt_conv_backward_bias, ctypes.byref(Conv(**cfg)), Buf(dy), db)
    return db.array()


@pytest.mark.parametrize("kind", ["conv1d", "conv2d", "grouped", "linear", "long", "column",
                                  "lengthwise"])
def test_conv_forward_and_gradients_match_torch(lib, kind):
    for index in range(CASES):
        rng = rng_for(kind, index)
        cfg = conv_config(rng, kind)
        d = conv_data(rng, kind, cfg)
        x, w = leaf(d["x"]), leaf(d["w"])
        b = None if d["b"] is None else leaf(d["b"])
        y = torch_conv(kind, cfg, x, w, b)
        y.backward(torch.from_numpy(d["dy"]))
        context = f"{kind} #{index}: {cfg} bias={'yes' if b is not None else 'NULL'}"
        got = c_conv_forward(lib, cfg, d["x"], d["w"], d["b"], y.shape)
        assert_close(got, y.detach(), f"forward {context}")
        init_x, init_w = normal(rng, x.shape), normal(rng, w.shape)
        assert_close(c_backward_input(lib, cfg, d["dy"], d["w"], init_x),
                     init_x + x.grad.numpy(), f"dx {context}")
        assert_close(c_backward_weight(lib, cfg, d["dy"], d["x"], init_w, [(0, cfg["out_h"])]),
                     init_w + w.grad.numpy(), f"dw {context}")
        if b is not None:
            init_b = normal(rng, b.shape)
            assert_close(c_backward_bias(lib, cfg, d["dy"], init_b), init_b + b.grad.numpy(),
                         f"db {context}")


def tiled_case(index: int) -> tuple[dict, dict]:
    """A conv2d with at least 3 output rows (so three non-empty row tiles exist)."""
    rng = rng_for("tiled", index)
    while True:
        cfg = conv_config(rng, "conv2d")
        if cfg["out_h"] >= 3:
            return cfg, conv_data(rng, "conv2d", cfg)


@pytest.mark.parametrize("index", range(6))
def test_tiled_weight_gradient_accumulates_over_row_tiles(lib, index):
    cfg, d = tiled_case(index)
    rng = rng_for("tiles", index)
    a = int(rng.integers(1, cfg["out_h"] - 1))
    b = int(rng.integers(a + 1, cfg["out_h"]))
    zeros = np.zeros(d["w"].shape, np.float32)
    x, w = leaf(d["x"]), leaf(d["w"])
    torch_conv("conv2d", cfg, x, w, None).backward(torch.from_numpy(d["dy"]))
    full = c_backward_weight(lib, cfg, d["dy"], d["x"], zeros, [(0, cfg["out_h"])])
    tiles = [(0, a), (a, b), (b, cfg["out_h"])]
    tiled = c_backward_weight(lib, cfg, d["dy"], d["x"], zeros, tiles)
    assert_close(tiled, full, f"tiled vs untiled {cfg} tiles={tiles}")
    assert_close(tiled, w.grad, f"tiled vs torch {cfg} tiles={tiles}")
    # Empty and out-of-range tiles add nothing (rows are clamped to [0, out_h]).
    edges = [(a, a), (cfg["out_h"], cfg["out_h"] + 4), (-3, 0)]
    assert_close(c_backward_weight(lib, cfg, d["dy"], d["x"], zeros, tiles + edges), full)
    # Zeroing dw per tile would keep only the last tile: that is not the gradient.
    last = c_backward_weight(lib, cfg, d["dy"], d["x"], zeros, tiles[-1:])
    assert np.abs(last - full).max() > 1e3 * RTOL * np.abs(full).max()


def test_weight_gradient_tiles_by_hand(lib):
    """1x1 conv over a 3x1 input with dy = 1: dw = sum of the rows in the tile."""
    cfg = {"n": 1, "in_c": 1, "in_h": 3, "in_w": 1, "out_c": 1, "out_h": 3, "out_w": 1,
           "k_h": 1, "k_w": 1, "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0,
           "dil_h": 1, "dil_w": 1, "groups": 1}
    x, dy = np.array([1.0, 10.0, 100.0], np.float32), np.ones(3, np.float32)
    start = np.array([0.5], np.float32)
    assert c_backward_weight(lib, cfg, dy, x, start, [(0, 1)]).tolist() == [1.5]
    assert c_backward_weight(lib, cfg, dy, x, start, [(1, 3)]).tolist() == [110.5]
    assert c_backward_weight(lib, cfg, dy, x, start, [(0, 1), (1, 3)]).tolist() == [111.5]


# ---- passes tiled through L1 (eb_train_tiles.h) -----------------------------------------

def conv_plane(cfg: dict) -> Plane:
    return Plane(**{k: v for k, v in cfg.items() if k != "n"})


def tile_for(rng, geometry: tiling.Geometry) -> tuple[int, int]:
    """A random tile the planner may choose: any rows, a channel count it would try."""
    rows = int(rng.integers(1, geometry.plane.out_h + 1))
    return rows, int(rng.choice(geometry.channel_counts()))


def l1_for(geometry: tiling.Geometry, rows: int, channels: int, ops: tiling.Operands) -> Buf:
    """An L1 buffer exactly as large as the planner says the largest tile is: a tile that
    staged past it would hit the guard."""
    return out((geometry.tile(rows, channels, ops)[0],))


def same_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert (got.view(np.uint32) == want.view(np.uint32)).all(), what


@pytest.mark.parametrize("kind", ["conv1d", "conv2d", "grouped", "linear", "long", "column",
                                  "lengthwise"])
def test_tiled_conv_passes_equal_the_untiled_kernels(lib, kind):
    """Every conv pass run tile by tile through an L1 buffer of the planner's size: the
    forward pass bit for bit, the gradients up to float32 summation order."""
    for index in range(CASES):
        rng = rng_for(f"tiles-{kind}", index)
        cfg = conv_config(rng, kind)
        d = conv_data(rng, kind, cfg)
        geometry = tiling.Geometry.conv(conv_plane(cfg), cfg["n"])
        rows, channels = tile_for(rng, geometry)
        tile, conv = ctypes.byref(Tile(rows, channels)), ctypes.byref(Conv(**cfg))
        context = f"{kind} #{index}: {cfg} tile {rows} x {channels}"
        b = None if d["b"] is None else Buf(d["b"])
        y = out(d["dy"].shape)
        call(lib.ebt_conv_forward_tiled, conv, tile, Buf(d["x"]), Buf(d["w"]), b, y,
             l1_for(geometry, rows, channels, tiling.conv_operands("forward", b is not None)))
        same_bits(y.array(), c_conv_forward(lib, cfg, d["x"], d["w"], d["b"], d["dy"].shape),
                  f"forward {context}")
        init_x, init_w = normal(rng, d["x"].shape), normal(rng, d["w"].shape)
        dx = out(init_x)
        call(lib.ebt_conv_backward_input_tiled, conv, tile, Buf(d["dy"]), Buf(d["w"]), dx,
             l1_for(geometry, rows, channels, tiling.conv_operands("input", False)))
        assert_close(dx.array(), c_backward_input(lib, cfg, d["dy"], d["w"], init_x),
                     f"dx {context}")
        init_b = normal(rng, (cfg["out_c"],))
        dw, db = out(init_w), out(init_b)
        call(lib.ebt_conv_backward_weight_tiled, conv, tile, Buf(d["dy"]), Buf(d["x"]), dw, db,
             l1_for(geometry, rows, channels, tiling.conv_operands("weight", True)))
        assert_close(dw.array(), c_backward_weight(lib, cfg, d["dy"], d["x"], init_w,
                                                   [(0, cfg["out_h"])]), f"dw {context}")
        assert_close(db.array(), c_backward_bias(lib, cfg, d["dy"], init_b), f"db {context}")
        only_bias = out(init_b)  # scope bias: no dw, no x staged
        call(lib.ebt_conv_backward_weight_tiled, conv, tile, Buf(d["dy"]), None, None,
             only_bias, l1_for(geometry, rows, channels,
                               tiling.conv_operands("weight", True, weights=False)))
        assert_close(only_bias.array(), db.array(), f"db alone {context}")


@pytest.mark.parametrize("mode", sorted(POOL_MODE))
def test_tiled_pool_passes_equal_the_untiled_kernels(lib, mode):
    for index in range(CASES):
        rng = rng_for(f"pool-tiles-{mode}", index)
        cfg = pool_config(rng, mode)
        plane = Plane(cfg["c"], cfg["in_h"], cfg["in_w"], cfg["c"], cfg["out_h"], cfg["out_w"],
                      cfg["k_h"], cfg["k_w"], cfg["stride_h"], cfg["stride_w"], groups=cfg["c"])
        geometry = tiling.Geometry.pool(plane, cfg["n"])
        rows, channels = tile_for(rng, geometry)
        x = int8_like(rng, (cfg["n"], cfg["c"], cfg["in_h"], cfg["in_w"]))
        dy = normal(rng, (cfg["n"], cfg["c"], cfg["out_h"], cfg["out_w"]))
        init = normal(rng, x.shape)
        want_y, want_dx = c_pool(lib, cfg, x, dy, init)
        tile, pool = ctypes.byref(Tile(rows, channels)), ctypes.byref(Pool(**cfg))
        y, dx = out(dy.shape), out(init)
        call(lib.ebt_pool_forward_tiled, pool, tile, Buf(x), y,
             l1_for(geometry, rows, channels, tiling.pool_operands("pool_forward", mode)))
        call(lib.ebt_pool_backward_tiled, pool, tile, Buf(x), Buf(dy), dx,
             l1_for(geometry, rows, channels, tiling.pool_operands("pool_input", mode)))
        context = f"{mode} #{index}: {cfg} tile {rows} x {channels}"
        same_bits(y.array(), want_y, f"forward {context}")
        assert_close(dx.array(), want_dx, f"dx {context}")


def test_a_tile_past_its_l1_size_is_caught(lib):
    """The guard check above is not vacuous: one float less of L1 than planned is hit."""
    cfg = {"n": 1, "in_c": 2, "in_h": 6, "in_w": 5, "out_c": 3, "out_h": 6, "out_w": 5,
           "k_h": 3, "k_w": 3, "stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1,
           "dil_h": 1, "dil_w": 1, "groups": 1}
    geometry = tiling.Geometry.conv(conv_plane(cfg), 1)
    ops = tiling.conv_operands("forward", False)
    short = out((geometry.tile(2, 3, ops)[0] - 1,))
    x, w = np.ones((1, 2, 6, 5), np.float32), np.ones((3, 2, 3, 3), np.float32)
    with pytest.raises(AssertionError, match="outside its buffer"):
        call(lib.ebt_conv_forward_tiled, ctypes.byref(Conv(**cfg)), ctypes.byref(Tile(2, 3)),
             Buf(x), Buf(w), None, out((1, 3, 6, 5)), short)


def with_out_size(cfg: dict) -> dict:
    return {**cfg, "out_h": conv_out(*(cfg[f] for f in ("in_h", "k_h", "stride_h", "pad_h",
                                                       "dil_h"))),
            "out_w": conv_out(*(cfg[f] for f in ("in_w", "k_w", "stride_w", "pad_w", "dil_w")))}


def test_branch_gradients_accumulate_into_one_buffer(lib):
    """x feeds two convs and a skip connection; dx is zeroed once and every consumer's
    backward adds into it, as torch sums the gradients of a tensor used three times."""
    rng = rng_for("branch", 0)
    a = with_out_size({"n": 2, "in_c": 4, "in_h": 7, "in_w": 7, "out_c": 6, "k_h": 3,
                       "k_w": 3, "stride_h": 1, "stride_w": 1, "pad_h": 1, "pad_w": 1,
                       "dil_h": 1, "dil_w": 1, "groups": 2})
    b = with_out_size({**a, "out_c": 3, "k_h": 1, "k_w": 3, "stride_h": 2, "stride_w": 2,
                       "pad_h": 0, "pad_w": 0, "dil_w": 2, "groups": 1})
    x_np = normal(rng, (2, 4, 7, 7))
    consumers = []  # (cfg, w, dy)
    for cfg in (a, b):
        _, w_shape, y_shape = conv_shapes("conv2d", cfg)
        consumers.append((cfg, normal(rng, w_shape), normal(rng, y_shape)))
    dy_skip = normal(rng, x_np.shape)
    x = leaf(x_np)
    loss = (x * torch.from_numpy(dy_skip)).sum()
    for cfg, w, dy in consumers:
        y = torch_conv("conv2d", cfg, x, torch.from_numpy(w), None)
        loss = loss + (y * torch.from_numpy(dy)).sum()
    loss.backward()
    dx = out(x_np.shape)
    for cfg, w, dy in consumers:
        call(lib.ebt_conv_backward_input, ctypes.byref(Conv(**cfg)), Buf(dy), Buf(w), dx)
    call(lib.ebt_accumulate, x_np.size, Buf(dy_skip), dx)
    assert_close(dx.array(), x.grad)
    # Zeroing dx in each backward would keep only the last consumer's gradient.
    cfg, w, dy = consumers[-1]
    only_last = c_backward_input(lib, cfg, dy, w, np.zeros(x_np.shape, np.float32))
    assert np.abs(only_last - x.grad.numpy()).max() > 1e3 * RTOL * x.grad.abs().max().item()


# ---- pooling ---------------------------------------------------------------------------

def pool_config(rng, mode: str) -> dict:
    in_h, in_w = int(rng.integers(1, 10)), int(rng.integers(1, 10))
    k_h, k_w = int(rng.integers(1, min(in_h, 4) + 1)), int(rng.integers(1, min(in_w, 4) + 1))
    cfg = {"n": int(rng.integers(1, 5)), "c": int(rng.integers(1, 5)), "in_h": in_h,
           "in_w": in_w, "k_h": k_h, "k_w": k_w, "stride_h": int(rng.integers(1, 4)),
           "stride_w": int(rng.integers(1, 4)), "mode": POOL_MODE[mode]}
    cfg["out_h"] = (in_h - k_h) // cfg["stride_h"] + 1
    cfg["out_w"] = (in_w - k_w) // cfg["stride_w"] + 1
    return cfg


def c_pool(lib, cfg: dict, x, dy, dx_init) -> tuple[np.ndarray, np.ndarray]:
    params = ctypes.byref(Pool(**cfg))
    y = out((cfg["n"], cfg["c"], cfg["out_h"], cfg["out_w"]))
    call(lib.ebt_pool_forward, params, Buf(x), y)
    dx = out(dx_init)
    call(lib.ebt_pool_backward, params, Buf(x), Buf(dy), dx)
    return y.array(), dx.array()


# Windows two columns wide at stride 2 (eb_train.c's pool_pairs: a row of outputs without
# the window loops): 1x2 and 2x2, rows apart or overlapping, odd widths (a column left
# over); and one column wide (a conv1d's pool as the generated code lays it out: pool_rowwise)
PAIR_POOLS = [(1, 2, 1, 2, 3, 9), (1, 2, 1, 2, 1, 2), (2, 2, 2, 2, 4, 7), (2, 2, 1, 2, 5, 6),
              (2, 1, 2, 1, 9, 1), (4, 1, 4, 1, 17, 1), (5, 1, 5, 1, 25, 1), (3, 1, 2, 1, 10, 1)]


def pair_pool_config(index: int, mode: str) -> dict:
    k_h, k_w, stride_h, stride_w, in_h, in_w = PAIR_POOLS[index]
    return {"n": 2, "c": 3, "in_h": in_h, "in_w": in_w, "k_h": k_h, "k_w": k_w,
            "stride_h": stride_h, "stride_w": stride_w, "mode": POOL_MODE[mode],
            "out_h": (in_h - k_h) // stride_h + 1, "out_w": (in_w - k_w) // stride_w + 1}


@pytest.mark.parametrize("mode", sorted(POOL_MODE))
def test_pool_matches_torch_with_ties(lib, mode):
    pool = F.max_pool2d if mode == "max" else F.avg_pool2d
    for index in range(2 * CASES + len(PAIR_POOLS)):
        rng = rng_for(f"pool_{mode}", index)
        cfg = pool_config(rng, mode) if index < 2 * CASES else \
            pair_pool_config(index - 2 * CASES, mode)
        x_np = int8_like(rng, (cfg["n"], cfg["c"], cfg["in_h"], cfg["in_w"]), high=2)
        dy = normal(rng, (cfg["n"], cfg["c"], cfg["out_h"], cfg["out_w"]))
        x = leaf(x_np)
        y = pool(x, (cfg["k_h"], cfg["k_w"]), (cfg["stride_h"], cfg["stride_w"]))
        y.backward(torch.from_numpy(dy))
        init = normal(rng, x_np.shape)
        got_y, got_dx = c_pool(lib, cfg, x_np, dy, init)
        assert_close(got_y, y.detach(), f"{mode} forward {cfg}")
        assert_close(got_dx, init + x.grad.numpy(), f"{mode} backward {cfg}")


@pytest.mark.parametrize(("window", "expected"), [
    ([[0.0, 0.0], [0.0, 0.0]], [[1.0, 0.0], [0.0, 0.0]]),    # all equal: the first
    ([[1.0, 3.0], [3.0, 2.0]], [[0.0, 1.0], [0.0, 0.0]]),    # rows before columns
    ([[-1.0, -2.0], [-1.0, -3.0]], [[1.0, 0.0], [0.0, 0.0]]),
    ([[2.0, 1.0], [5.0, 5.0]], [[0.0, 0.0], [1.0, 0.0]]),
])
def test_max_pool_tie_rule_by_hand(lib, window, expected):
    cfg = {"n": 1, "c": 1, "in_h": 2, "in_w": 2, "out_h": 1, "out_w": 1, "k_h": 2, "k_w": 2,
           "stride_h": 2, "stride_w": 2, "mode": POOL_MODE["max"]}
    x = np.array([[window]], np.float32)
    _, dx = c_pool(lib, cfg, x, np.ones((1, 1, 1, 1), np.float32), np.zeros_like(x))
    assert dx[0, 0].tolist() == expected
    xt = leaf(x)
    F.max_pool2d(xt, 2).sum().backward()
    assert xt.grad[0, 0].tolist() == expected


# ---- elementwise: activations, add, concat ---------------------------------------------

TORCH_ACT = {"none": lambda t: t * 1.0, "relu": F.relu, "abs": torch.abs}
# the float part's clamp to the int8 range after the activation: float training's
TORCH_ACT.update({f"{act}_clamp": (lambda t, act=act: numerics.torch_clamp_float(t, act))
                  for act in ("relu", "abs")})
TORCH_ACT["clamp"] = lambda t: numerics.torch_clamp_float(t, "none")


@pytest.mark.parametrize("act", sorted(ACT))
def test_activation_matches_torch(lib, act):
    rng = rng_for(f"act_{act}", 0)
    # the clamp's ends and beyond, where its gradient is 0 (torch: strictly inside passes)
    ends = np.array([-1.0, 127 / 128, 1.0, -1.5, 1.5, -127 / 128, -0.0, 1e-45,
                     np.nextafter(np.float32(127 / 128), np.float32(0)),
                     np.nextafter(np.float32(127 / 128), np.float32(2))], np.float32)
    x_np = np.concatenate([int8_like(rng, 200), normal(rng, 57), np.zeros(3, np.float32),
                           ends, -ends])
    dy, init = normal(rng, x_np.shape), normal(rng, x_np.shape)
    x = leaf(x_np)
    y = TORCH_ACT[act](x)
    y.backward(torch.from_numpy(dy))
    got = out(x_np.shape)
    call(lib.ebt_act_forward, ACT[act], x_np.size, Buf(x_np), got)
    assert_close(got.array(), y.detach())
    in_place = out(x_np)
    call(lib.ebt_act_forward, ACT[act], x_np.size, in_place, in_place)
    assert_close(in_place.array(), y.detach())
    dx = out(init)  # written, whatever it held (eb_train.h: the activations write)
    call(lib.ebt_act_backward, ACT[act], x_np.size, Buf(x_np), Buf(dy), dx)
    assert_close(dx.array(), x.grad.numpy())
    zero_grad = dx.array()[x_np == 0]
    assert (zero_grad == 0).all() or act in ("none", "clamp")  # relu'(0) = sign(0) = 0
    if "abs" not in act:  # in place, as the generated code runs them: the output's mask
        masked = out(dy)
        call(lib.ebt_act_backward, ACT[act], x_np.size, Buf(in_place.array()), masked, masked)
        assert_close(masked.array(), x.grad.numpy())


def test_add_forward_and_backward(lib):
    rng = rng_for("add", 0)
    a_np, b_np, dy = (normal(rng, (3, 5, 4)) for _ in range(3))
    a, b = leaf(a_np), leaf(b_np)
    y = a + b
    y.backward(torch.from_numpy(dy))
    got = out(a_np.shape)
    call(lib.ebt_add_forward, a_np.size, Buf(a_np), Buf(b_np), got)
    assert_close(got.array(), y.detach())
    init_a, init_b = normal(rng, a_np.shape), normal(rng, b_np.shape)
    da, db = out(init_a), out(init_b)
    call(lib.ebt_accumulate, a_np.size, Buf(dy), da)
    call(lib.ebt_accumulate, b_np.size, Buf(dy), db)
    assert_close(da.array(), init_a + a.grad.numpy())
    assert_close(db.array(), init_b + b.grad.numpy())


@pytest.mark.parametrize("count", [1, 15, 16, 17, 100])
def test_copy_and_zero(lib, count):
    """ebt_copy (the tiles' staging) and ebt_zero (the per-step clearing): exactly count
    floats (the guards around each buffer catch a float too many)."""
    src = normal(rng_for("copy", count), (count,))
    dst = out(normal(rng_for("copy_dst", count), (count,)))
    call(lib.ebt_copy, dst, Buf(src), count)
    np.testing.assert_array_equal(dst.array(), src)
    cleared = out(src)
    call(lib.ebt_zero, cleared, count)
    assert not cleared.array().any() and not np.signbit(cleared.array()).any()


@pytest.mark.parametrize("index", range(8))
def test_concat_forward_and_backward(lib, index):
    rng = rng_for("concat", index)
    n, h, w = int(rng.integers(1, 5)), int(rng.integers(1, 5)), int(rng.integers(1, 5))
    channels = [int(c) for c in rng.integers(1, 5, size=int(rng.integers(1, 5)))]
    xs_np = [normal(rng, (n, c, h, w)) for c in channels]
    xs = [leaf(a) for a in xs_np]
    y = torch.cat(xs, dim=1)
    dy = normal(rng, tuple(y.shape))
    y.backward(torch.from_numpy(dy))
    elems = (ctypes.c_int * len(channels))(*(c * h * w for c in channels))
    got = out(tuple(y.shape))
    call(lib.ebt_concat_forward, n, len(xs), elems, [Buf(a) for a in xs_np], got)
    assert_close(got.array(), y.detach())
    inits = [normal(rng, a.shape) for a in xs_np]
    dxs = [out(i) for i in inits]
    call(lib.ebt_concat_backward, n, len(xs), elems, Buf(dy), dxs)
    for dx, init, x in zip(dxs, inits, xs, strict=True):
        assert_close(dx.array(), init + x.grad.numpy())


# ---- losses ----------------------------------------------------------------------------

@pytest.mark.parametrize("index", range(CASES))
def test_softmax_cross_entropy_matches_torch(lib, index):
    rng = rng_for("cross_entropy", index)
    n, classes = int(rng.integers(1, 9)), int(rng.integers(2, 12))
    scale = float(rng.choice([0.1, 1.0, 10.0, 300.0]))  # 300: exp() would overflow unshifted
    logits_np = normal(rng, (n, classes), scale) + np.float32(rng.choice([0.0, 1e3]))
    labels = rng.integers(0, classes, size=n).astype(np.int32)
    logits = leaf(logits_np)
    loss = F.cross_entropy(logits, torch.from_numpy(labels).long())
    loss.backward()
    grad = out(np.full(logits_np.shape, 7.0, np.float32))  # written, not accumulated
    value = call(lib.ebt_softmax_cross_entropy, n, classes, Buf(logits_np),
                 labels.ctypes.data_as(ctypes.POINTER(ctypes.c_int32)), grad)
    assert_close(value, loss.detach(), f"loss n={n} classes={classes} scale={scale}")
    assert_close(grad.array(), logits.grad, f"grad n={n} classes={classes} scale={scale}")


@pytest.mark.parametrize("index", range(CASES))
def test_mse_matches_torch(lib, index):
    rng = rng_for("mse", index)
    n, k = int(rng.integers(1, 9)), int(rng.integers(1, 20))
    y_np, target = normal(rng, (n, k)), normal(rng, (n, k))
    y = leaf(y_np)
    loss = F.mse_loss(y, torch.from_numpy(target))
    loss.backward()
    grad = out(np.full(y_np.shape, 7.0, np.float32))
    value = call(lib.ebt_mse, n, k, Buf(y_np), Buf(target), grad)
    assert_close(value, loss.detach(), f"loss n={n} k={k}")
    assert_close(grad.array(), y.grad, f"grad n={n} k={k}")


# ---- optimizers ------------------------------------------------------------------------

STEPS = 6


def f32(v: float) -> float:
    """A hyper-parameter both sides see exactly (the C API takes float, torch a double)."""
    return float(np.float32(v))


@pytest.mark.parametrize("momentum", [0.0, 0.9])
def test_sgd_matches_torch_over_steps(lib, momentum):
    rng = rng_for("sgd", int(momentum * 10))
    lr, momentum = f32(0.05), f32(momentum)
    w0 = normal(rng, (37,))
    param = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    opt = torch.optim.SGD([param], lr=lr, momentum=momentum, foreach=False)
    w, buf = out(w0), (out(w0.shape) if momentum else None)  # the buffer starts at zero
    for step in range(STEPS):
        g = normal(rng, w0.shape)
        param.grad = torch.from_numpy(g.copy())
        opt.step()
        call(lib.ebt_sgd_step, w0.size, w, Buf(g), buf, lr, momentum)
        assert_close(w.array(), param.detach(), f"weights after step {step + 1}")
        if momentum:
            assert_close(buf.array(), opt.state[param]["momentum_buffer"], f"buf {step + 1}")


@pytest.mark.parametrize(("betas", "first_step"), [
    ((0.9, 0.999), 1), ((0.8, 0.99), 1), ((0.5, 0.9), 1), ((0.9, 0.999), 1000)])
def test_adam_matches_torch_over_steps(lib, betas, first_step):
    rng = rng_for("adam", first_step + int(betas[1] * 1000))
    lr, beta1, beta2, eps = f32(1e-2), f32(betas[0]), f32(betas[1]), f32(1e-8)
    w0, m0, v0 = normal(rng, (41,)), normal(rng, (41,), 0.1), np.abs(normal(rng, (41,), 0.1))
    if first_step == 1:
        m0, v0 = np.zeros_like(m0), np.zeros_like(v0)
    param = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    opt = torch.optim.Adam([param], lr=lr, betas=(beta1, beta2), eps=eps, foreach=False)
    opt.state[param] = {"step": torch.tensor(float(first_step - 1)),
                        "exp_avg": torch.from_numpy(m0.copy()),
                        "exp_avg_sq": torch.from_numpy(v0.copy())}
    w, m, v = out(w0), out(m0), out(v0)
    for step in range(first_step, first_step + STEPS):
        g = normal(rng, w0.shape)
        param.grad = torch.from_numpy(g.copy())
        opt.step()
        call(lib.ebt_adam_step, w0.size, w, Buf(g), m, v, lr, beta1, beta2, eps, step)
        state = opt.state[param]
        assert_close(m.array(), state["exp_avg"], f"m after step {step}")
        assert_close(v.array(), state["exp_avg_sq"], f"v after step {step}")
        assert_close(w.array(), param.detach(), f"weights after step {step}")


# ---- the guards themselves, and the build ---------------------------------------------

def test_guard_check_catches_a_stray_write(lib):
    """The sentinel check every call goes through can fail: a write just past an output
    buffer, or into an input, is reported."""
    ones = np.ones(4, np.float32)
    y = out((4,))
    call(lib.ebt_add_forward, 4, Buf(ones), Buf(ones), y)
    assert y.array().tolist() == [2.0] * 4
    past_end = out((3,))
    with pytest.raises(AssertionError, match="outside its buffer"):
        call(lib.ebt_add_forward, 4, Buf(ones), Buf(ones), past_end)
    src = Buf(ones)
    with pytest.raises(AssertionError, match="into an input"):
        call(lib.ebt_accumulate, 4, Buf(ones), src)


def test_only_allowed_libm_functions(tmp_path):
    obj = tmp_path / "eb_train.o"
    result = subprocess.run([GCC, *WARN_FLAGS, "-c", str(TRAIN / "eb_train.c"), "-o", str(obj)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    nm = subprocess.run(["nm", "-u", str(obj)], capture_output=True, text=True, check=True)
    undefined = {line.split()[-1] for line in nm.stdout.splitlines() if line.strip()}
    # GCC may turn a copy or clearing loop into memcpy / memset, which it requires of every
    # C library, freestanding ones included
    assert undefined <= LIBM_ALLOWED | {"__stack_chk_fail", "memcpy", "memset"}, \
        undefined - LIBM_ALLOWED


@pytest.mark.skipif(ARM_GCC is None, reason="arm-none-eabi-gcc is not on PATH")
def test_compiles_warning_free_for_cortex_m4(tmp_path):
    result = subprocess.run(
        [ARM_GCC, *M4_FLAGS, *WARN_FLAGS, "-c", str(TRAIN / "eb_train.c"),
         "-o", str(tmp_path / "eb_train.o")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
