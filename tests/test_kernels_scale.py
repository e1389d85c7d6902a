"""The per-channel scale's lanes (eb_dw_opt.c, eb_dw_lanes: a 1x1 depthwise conv of any
multiplier, y = sat(floor((init + x w) / 2^s))): for a right shift s of 0..8 and |w| 2^(8 - s)
<= 256 two pixels a 32-bit multiply, the inputs as unsigned bytes (x ^ 0x80, or x ^ 0x7F for
a negative weight), each half (init + x w) 2^(8 - s) + 2^15 held in [0, 65535] by one of three
forms -- MLA where no input leaves it, UQADD16 where only the top can, UQSUB16 where only
the bottom can, a RELU channel moved up by whole bytes and clamped by UQSUB8 -- and the
output its top byte. Drawn by hypothesis over multipliers, plane sizes (1..3 pixels: the
outputs one at a time; 4, 16, 17: the word loops), every shift (0..8, past them: the 32-bit
sums; left shifts), activation and rounding, weights and biases that put a channel in each
form and at each form's edge (lanes at 0 and 65535 exactly, a channel wholly saturated); on
the host (portable C: the same lanes an output at a time) and on the Cortex-M4 under QEMU
(the word loops); and on the M4 that a per-channel scale runs in fewer instructions than it
did on the 32-bit sums."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_kernels_col import _plane
from test_kernels_opt import (
    assert_m4_exact,
    build_m4,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_convs_exact,
    m4_instructions,
    m4_test_program,
    needs_m4,
    run_conv_pair,
)

from edgebuild.ops import conv_path


def _scale(c: int, m: int, h: int, w: int, shift: int = -7, act: int = 1,
           rounding: int = 1) -> dict:
    return {"in_c": c, "in_h": h, "in_w": w, "out_c": c * m, "k_h": 1, "k_w": 1,
            "stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1,
            "groups": c, "out_h": h, "out_w": w, "shift": shift, "rounding": rounding,
            "act": act}


def _lanes_bias(rng: np.random.Generator, w: np.ndarray, s: int) -> np.ndarray:
    """Biases that put each channel at a chosen place of its lanes: unsaturated (the middle),
    at either edge (a lane at 0 or 65535 exactly for the extreme input), a little or far past
    either (one saturating side), wholly saturated, near the int32 limits."""
    w = w.astype(np.int64).reshape(-1)
    # the sum's range over x in [-128, 127], in output steps of 2^s
    lo = np.minimum(-128 * w, 127 * w)
    hi = np.maximum(-128 * w, 127 * w)
    step = 1 << s
    targets = []
    for j in range(w.size):
        kind = rng.integers(0, 9)
        if kind == 0:
            b = -(lo[j] + hi[j]) // 2
        elif kind == 1:      # the lowest sum exactly at y = -128
            b = -128 * step - lo[j]
        elif kind == 2:      # the highest exactly at the top of y = 127
            b = 128 * step - 1 - hi[j]
        elif kind == 3:
            b = -128 * step - lo[j] - rng.integers(1, 300) * step
        elif kind == 4:
            b = 128 * step - 1 - hi[j] + rng.integers(1, 300) * step
        elif kind == 5:
            b = int(rng.integers(-2**20, 2**20))
        elif kind == 6:
            b = int(rng.choice([2**31 - 1 - 2**15, -2**31 + 2**15]))
        else:
            b = int(rng.integers(-4 * step * 128, 4 * step * 128))
        targets.append(b)
    return np.clip(np.array(targets), -2**31, 2**31 - 1).astype(np.int32)


@st.composite
def scale_layers(draw) -> dict:
    c = draw(st.integers(1, 5))
    m = draw(st.integers(1, 4))
    h = draw(st.integers(1, 3))
    w = draw(st.sampled_from([1, 2, 3, 4, 5, 7, 16, 17, 21, 33]))
    return _scale(c, m, h, w, shift=draw(st.sampled_from([0, -1, -3, -5, -6, -7, -7, -8, -8,
                                                          -9, -12, 2])),
                  act=draw(st.sampled_from([0, 1, 1, 2])), rounding=draw(st.integers(0, 1)))


def _data(cfg: dict, rng: np.random.Generator, weights: str):
    x = rng.integers(-128, 128, size=(cfg["in_c"], cfg["in_h"], cfg["in_w"]), dtype=np.int8)
    s = max(-cfg["shift"], 0)
    if weights == "fit":   # |w| 2^(8 - s) <= 256: the lanes' weights
        top = min(127, 256 >> (8 - s)) if s <= 8 else 127
        w = rng.integers(-top, top + 1, size=(cfg["out_c"], 1, 1, 1))
    elif weights == "edge":  # the largest that fit, and the smallest that do not
        top = 256 >> (8 - s) if s <= 8 else 127
        w = rng.choice([top, -top, min(top + 1, 127), -min(top + 1, 128), 0, -128, 127],
                       size=(cfg["out_c"], 1, 1, 1))
        w = np.clip(w, -128, 127)
    else:
        w = rng.integers(-128, 128, size=(cfg["out_c"], 1, 1, 1))
    return x, w.astype(np.int8)


def _case(cfg: dict, rng: np.random.Generator, weights: str) -> tuple:
    x, w = _data(cfg, rng, weights)
    return cfg, x, w, _lanes_bias(rng, w, max(-cfg["shift"], 0))


@settings(max_examples=300, deadline=None)
@given(cfg=scale_layers(), seed=st.integers(0, 2**32 - 1),
       weights=st.sampled_from(["fit", "edge", "any"]), wide=st.booleans())
def test_per_channel_scale_equals_reference(lib, cfg, seed, weights, wide):  # noqa: F811
    assert conv_path.kernel_choice(_plane(cfg)) == {"depthwise", "dw_table"}
    _, x, w, bias = _case(cfg, np.random.default_rng(seed), weights)
    ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
    np.testing.assert_array_equal(opt, ref, err_msg=str(cfg))


def test_per_channel_scale_at_every_lane_edge(lib):  # noqa: F811
    """Every weight -128..127 at shifts 0..8 (and 9, 12: the 32-bit sums), each bias at
    the lanes' edges for its weight, on every input -128..127: equal, relu and none."""
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16)
    rng = np.random.default_rng(5)
    for s in (0, 1, 4, 7, 8, 9, 12):
        w = np.arange(-128, 128, dtype=np.int64)
        cfg = _scale(1, 256, 16, 16, shift=-s)
        for act in (0, 1):
            for _ in range(3):
                bias = _lanes_bias(rng, w.reshape(-1, 1, 1, 1), s)
                c = {**cfg, "act": act}
                ref, opt = run_conv_pair(lib, c, x, w.astype(np.int8).reshape(-1, 1, 1, 1),
                                         bias, False)
                np.testing.assert_array_equal(opt, ref, err_msg=f"s={s} act={act}")


@needs_m4
@settings(max_examples=3, deadline=None)
@given(cfgs=st.lists(scale_layers(), min_size=8, max_size=12), seed=st.integers(0, 2**32 - 1))
def test_m4_per_channel_scale_equals_reference(lib, m4_build, cfgs, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    m4_convs_exact(lib, m4_build, "scale",
                   [_case(cfg, rng, ("fit", "edge", "any")[i % 3]) for i, cfg in enumerate(cfgs)])


@needs_m4
def test_m4_per_channel_scale_lanes_at_every_edge(lib, m4_build):  # noqa: F811
    """The edge cases above (every weight, biases at and past the lanes' edges, shifts 0..9)
    on the M4's word loops: equal."""
    rng = np.random.default_rng(6)
    x = np.arange(-128, 128, dtype=np.int8).reshape(1, 16, 16)
    cases = []
    w = np.arange(-128, 128, dtype=np.int64).reshape(-1, 1, 1, 1)
    for s, act in ((0, 1), (4, 0), (7, 1), (7, 0), (8, 1), (8, 0), (9, 1)):
        cfg = _scale(1, 256, 16, 16, shift=-s, act=act)
        cases.append((cfg, x, w.astype(np.int8), _lanes_bias(rng, w, s)))
    source = m4_test_program(lib, cases, linears=False)
    elf = build_m4(m4_build, "scale_edges", source)
    assert_m4_exact(elf, "scale_edges")


@needs_m4
def test_m4_per_channel_scale_beats_the_32_bit_sums(lib, m4_build):  # noqa: F811
    """24 channels of 583 pixels (relu, right shift 6: seed 32's 1x1 depthwise, there at 7)
    and 64 of 1 x 100 of multiplier 3 (none, 5), random biases: at least `fewer`
    instructions an output fewer with weights the lanes take (|w| 2^(8 - s) <= 256) than
    with weights just past them (their channels on the 32-bit sums, eb_dw_scale16_run)."""
    rng = np.random.default_rng(13)
    for cfg, fewer in ((_scale(24, 1, 1, 583, shift=-6), 0.8),
                       (_scale(64, 3, 1, 100, shift=-5, act=0), 0.6)):
        x = rng.integers(-128, 128, size=(cfg["in_c"], 1, cfg["in_w"]), dtype=np.int8)
        s = -cfg["shift"]
        top = 256 >> (8 - s)
        counts = []
        for name, w in (("lanes", rng.integers(-top, top + 1, size=cfg["out_c"])),
                        ("sums", rng.choice([top + 1, -top - 1], size=cfg["out_c"]))):
            w = np.clip(w, -128, 127).astype(np.int8).reshape(-1, 1, 1, 1)
            bias = rng.integers(-2**(s + 6), 2**(s + 6), size=cfg["out_c"]).astype(np.int32)
            source = m4_test_program(lib, [(cfg, x, w, bias)], linears=False)
            elf = build_m4(m4_build, f"scale_{name}_{cfg['out_c']}", source)
            assert_m4_exact(elf, name)
            counts.append(m4_instructions(m4_build, elf))
        outputs = cfg["out_c"] * cfg["out_w"]
        print(cfg["out_c"], counts, (counts[1] - counts[0]) / outputs)
        assert counts[0] <= counts[1] - fewer * outputs, (cfg, counts, outputs)
