"""The optimized kernels' special paths against the reference kernels on the host, on
hypothesis-drawn shapes (portable C; test_kernels_opt.py runs the same algorithm under
QEMU):

* first layers with one input channel (in_c == groups == 1): eb_conv2d_opt sends them
  through its direct (depthwise) path, out_c being the channel multiplier;
* a dense conv whose single output pixel's window is the whole unpadded input: a linear
  layer over the input (eb_linear_core);
* eb_pool2d_opt (eb_pool_opt.c): max and average pooling, any window, stride and rounding.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from kernel_abi import I8, POOL_FIELDS, PoolParams
from test_kernels_opt import (
    CFLAGS,
    KERNELS,
    P8,
    conv_out,
    int8_data,
    int_weights,
    lib,  # noqa: F401 (the fixture)
    random_bias,
    run_conv_pair,
)

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="no host C compiler")


@pytest.fixture(scope="module")
def pool_lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_pool_opt")
    shared = build / "libeb_pool.so"
    result = subprocess.run(
        ["gcc", *CFLAGS, "-shared", "-fPIC", f"-I{KERNELS}", str(KERNELS / "eb_kernels.c"),
         str(KERNELS / "eb_pool_opt.c"), "-o", str(shared)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    for name in ("eb_pool2d", "eb_pool2d_opt"):
        getattr(so, name).argtypes = [ctypes.POINTER(PoolParams), P8, P8]
        getattr(so, name).restype = None
    return so


quant = st.fixed_dictionaries({"rounding": st.integers(0, 1), "act": st.integers(0, 2),
                               "shift": st.integers(-16, 2)})


@st.composite
def first_layers(draw) -> dict:
    """in_c == groups == 1, 1-D ([1][1][L] or [1][L][1]) or 2-D, any kernel, stride,
    padding and dilation."""
    layout = draw(st.sampled_from(["2d", "1d", "1d-vertical"]))
    if layout == "2d":
        h, w = draw(st.integers(1, 16)), draw(st.integers(1, 30))
        k_h, k_w = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        s_h, s_w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
        p_h, p_w = draw(st.integers(0, 3)), draw(st.integers(0, 3))
        d_h, d_w = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    else:
        h, k_h, s_h, p_h, d_h = 1, 1, 1, 0, 1
        w, k_w = draw(st.integers(1, 60)), draw(st.integers(1, 9))
        s_w, p_w, d_w = draw(st.integers(1, 3)), draw(st.integers(0, 4)), draw(st.integers(1, 3))
    cfg = {"in_c": 1, "in_h": h, "in_w": w, "out_c": draw(st.integers(1, 20)), "k_h": k_h,
           "k_w": k_w, "stride_h": s_h, "stride_w": s_w, "pad_h": p_h, "pad_w": p_w,
           "dil_h": d_h, "dil_w": d_w, "groups": 1, **draw(quant)}
    if layout == "1d-vertical":
        for a, b in (("in_h", "in_w"), ("k_h", "k_w"), ("stride_h", "stride_w"),
                     ("pad_h", "pad_w"), ("dil_h", "dil_w")):
            cfg[a], cfg[b] = cfg[b], cfg[a]
    cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["dil_h"])
    cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], cfg["dil_w"])
    assume(cfg["out_h"] >= 1 and cfg["out_w"] >= 1)
    return cfg


@st.composite
def whole_input_convs(draw) -> dict:
    """Dense convs with one output pixel: the kernel covers the whole unpadded input (the
    linear path), or nearly (padding, a kernel one short, groups: the other paths)."""
    in_c, h, w = draw(st.integers(1, 40)), draw(st.integers(1, 6)), draw(st.integers(1, 9))
    groups = draw(st.sampled_from([1, 1, 1, in_c]))
    pad = draw(st.sampled_from([(0, 0), (0, 0), (1, 0), (0, 1)]))
    short = draw(st.sampled_from([(0, 0), (0, 0), (0, 1), (1, 0)]))
    k_h, k_w = max(h - short[0], 1), max(w - short[1], 1)
    cfg = {"in_c": in_c, "in_h": h, "in_w": w, "out_c": groups * draw(st.integers(1, 9)),
           "k_h": k_h, "k_w": k_w, "stride_h": draw(st.integers(1, 3)),
           "stride_w": draw(st.integers(1, 3)), "pad_h": pad[0], "pad_w": pad[1],
           "dil_h": 1, "dil_w": 1, "groups": groups, **draw(quant)}
    cfg["out_h"] = conv_out(h, k_h, cfg["stride_h"], pad[0], 1)
    cfg["out_w"] = conv_out(w, k_w, cfg["stride_w"], pad[1], 1)
    return cfg


def check_conv(lib, cfg, seed, with_bias):  # noqa: F811 (lib: the fixture)
    rng = np.random.default_rng(seed)
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    bias = random_bias(rng, cfg["out_c"]) if with_bias else None
    for wide in (True, False):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


@settings(max_examples=300, deadline=None)
@given(cfg=first_layers(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_one_input_channel_convs(lib, cfg, seed, with_bias):  # noqa: F811
    check_conv(lib, cfg, seed, with_bias)


@settings(max_examples=200, deadline=None)
@given(cfg=whole_input_convs(), seed=st.integers(0, 2**32 - 1), with_bias=st.booleans())
def test_whole_input_convs(lib, cfg, seed, with_bias):  # noqa: F811
    check_conv(lib, cfg, seed, with_bias)


@st.composite
def pools(draw) -> dict:
    """Max or average, 1-D or 2-D windows (global ones included), strides below, at and
    above the window, every rounding of the average."""
    c = draw(st.integers(1, 5))
    if draw(st.booleans()):
        k_h, s_h, in_h = 1, 1, 1
    else:
        k_h, s_h = draw(st.integers(1, 5)), draw(st.integers(1, 5))
        in_h = draw(st.integers(k_h, 14))
    k_w, s_w = draw(st.integers(1, 13)), draw(st.sampled_from([None, 1, 2, 3, 5]))
    s_w = k_w if s_w is None else s_w
    in_w = draw(st.integers(k_w, 40))
    if draw(st.integers(0, 5)) == 0:  # a global pool
        k_h, k_w, in_h, in_w = in_h, in_w, in_h, in_w
    return {"c": c, "in_h": in_h, "in_w": in_w, "out_h": (in_h - k_h) // s_h + 1,
            "out_w": (in_w - k_w) // s_w + 1, "k_h": k_h, "k_w": k_w, "stride_h": s_h,
            "stride_w": s_w, "mode": draw(st.integers(0, 1)), "rounding": draw(st.integers(0, 2))}


@settings(max_examples=400, deadline=None)
@given(cfg=pools(), seed=st.integers(0, 2**32 - 1))
def test_pool_opt_random(pool_lib, cfg, seed):
    rng = np.random.default_rng(seed)
    x = np.ascontiguousarray(int8_data(rng, (cfg["c"], cfg["in_h"], cfg["in_w"])))
    params = PoolParams(**{k: cfg[k] for k in (*POOL_FIELDS, "mode", "rounding")})
    count = cfg["c"] * cfg["out_h"] * cfg["out_w"]
    ref = np.full(count + 8, 0x5A, dtype=np.int8)
    opt = ref.copy()
    xp = x.ctypes.data_as(ctypes.POINTER(I8))
    pool_lib.eb_pool2d(ctypes.byref(params), xp, ref.ctypes.data_as(ctypes.POINTER(I8)))
    pool_lib.eb_pool2d_opt(ctypes.byref(params), xp, opt.ctypes.data_as(ctypes.POINTER(I8)))
    assert (opt[count:] == 0x5A).all(), "eb_pool2d_opt wrote past its output"
    np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))
