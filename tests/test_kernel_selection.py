"""Which optimized kernels a project links (ops.c OPTIONAL_PATHS -> eb_config.h's
EB_OPT_NO_<PATH>): the generator names, per layer, the paths it runs (ops.conv_path.
kernel_paths, ops.conv.optimized_paths, ops.c.pool_call) and a model links only those
(issue 32: the kernels a model links add at most 24 KiB of flash). Leaving a path out must
never change a result -- its layers take the next path, at worst the reference loops -- and
the prediction must name the path the C takes, or the layer would run slower than it can.
On the Cortex-M4 under QEMU, one layer of each kernel."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
from test_kernels_opt import (
    KERNELS,
    assert_m4_exact,
    build_m4,
    conv_out,
    dw_data,
    lib,  # noqa: F401 (the fixture)
    m4_build,  # noqa: F401 (the fixture)
    m4_convs_exact,
    m4_instructions,
    m4_test_program,
    needs_m4,
    plane_of,
    random_bias,
)

from edgebuild.ops.c import OPTIONAL_PATHS
from edgebuild.ops.conv_path import (
    kernel_paths,
    line_fits_biases,
    shift_forms,
    two_pixel_block,
)

ARM_SIZE = shutil.which("arm-none-eabi-size")
# the paths of the files m4_test_program links (eb_kernels_opt.c, eb_dw_opt.c) that its
# convs run: every optional path but the packed weights', the linear rows' (and their forms
# by input count), the pools' and TFLite's
CONV_PATHS = tuple(p for p in OPTIONAL_PATHS
                   if p not in ("packed", "linear_q", "pool_max", "pool_avg")
                   and not p.startswith(("tfl_", "linear_k")))


def _layer(in_c, hw, k, out_c, groups, pad=(0, 0), stride=(1, 1), act=1) -> dict:
    cfg = {"in_c": in_c, "in_h": hw[0], "in_w": hw[1], "out_c": out_c, "k_h": k[0],
           "k_w": k[1], "stride_h": stride[0], "stride_w": stride[1], "pad_h": pad[0],
           "pad_w": pad[1], "dil_h": 1, "dil_w": 1, "groups": groups, "shift": -9,
           "rounding": 1, "act": act}
    cfg["out_h"] = conv_out(hw[0], k[0], stride[0], pad[0], 1)
    cfg["out_w"] = conv_out(hw[1], k[1], stride[1], pad[1], 1)
    return cfg


def _dilated(cfg: dict, dil: int) -> dict:
    """cfg at dilation dil along the rows."""
    out_w = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], dil)
    return {**cfg, "dil_w": dil, "out_w": out_w}


# One layer of each kernel: 3-tap (3x3, padded; 1-D with multiplier 4: its rows two channels
# a pass); tile (5x5 x2, turned, and one input channel
# to 6, 3x3 stride 2: its pair loop of any frame; 1-D k = 5, multiplier 2 at stride 1 / 2:
# its pair loops along the rows; 2x15, and 1-D k = 7 stride 2: its one-channel loops along
# the rows; one input channel to 16, 1-D k = 5, and to 12, 3x3 stride 2: the fan, two pixels
# and one at a time; 1x2 with multiplier 4: its one-tap-pair rows by an immediate shift);
# column (dense 8 -> 1 5x1 stride 2); scale (1x1); table
# (a 15x7 kernel: more tap pairs than the tile holds); a grouped 5x5 on a one-row map (the
# tile kernel, weighed against the column kernels, which cover it but are then not linked);
# a 15x15 stride-2 depthwise x2 on a smaller map (120 tap pairs: the tile kernel's most);
# a dense 1x8 with 6 of 41 outputs a row in the width padding (the column kernels' edges);
# grouped 1x1s of 2 and 3 inputs a group, 12 and 10 outputs (the GEMM's short rows); a dense
# 3 -> 1 1x1 and one of 2 inputs and one output a group (the few-input kernel);
# im2col (a dense 3x3, relu; a dense
# 1x3, act none; a dense 3x3 stride 2: its gather; a dense 1x13 on a row of 2 outputs: the
# 2-pixel GEMM rows, 7 outputs so that the last runs alone); the line kernel (1x9 on 4 rows,
# relu; 1-D k = 7 at dilation 2, none, on an odd row of 61 outputs; 1-D k = 9 at stride 2)
LAYERS = [_layer(4, (9, 10), (3, 3), 4, 4, pad=(1, 1)),
          _layer(3, (12, 14), (5, 5), 6, 3, pad=(2, 2)),
          _layer(2, (1, 97), (1, 3), 8, 2, pad=(0, 1)),
          _layer(2, (2, 200), (2, 15), 2, 2, pad=(0, 7)),
          _layer(2, (1, 128), (1, 5), 4, 2, pad=(0, 2)),
          _layer(2, (1, 183), (1, 5), 4, 2, pad=(0, 2), stride=(1, 2)),
          _layer(2, (1, 200), (1, 7), 2, 2, pad=(0, 3), stride=(1, 2), act=0),
          _layer(1, (21, 20), (3, 3), 6, 1, stride=(2, 2)),
          _layer(8, (20, 12), (5, 1), 1, 1, pad=(2, 0), stride=(2, 2)),
          _layer(5, (6, 9), (1, 1), 5, 5),
          _layer(24, (1, 40), (1, 5), 2, 1, pad=(0, 2)),
          _layer(48, (2, 29), (1, 1), 2, 2),
          _layer(3, (12, 20), (6, 1), 3, 3, pad=(2, 0)),
          _layer(3, (9, 11), (1, 1), 2, 1),
          _layer(2, (20, 16), (15, 9), 2, 2, pad=(7, 4)),
          _layer(4, (1, 61), (5, 5), 8, 2, pad=(2, 2)),
          _layer(2, (14, 18), (15, 15), 4, 2, pad=(7, 7), stride=(2, 2)),
          _layer(32, (2, 42), (1, 8), 1, 1, pad=(0, 3)),
          _layer(8, (40, 17), (9, 9), 1, 1, pad=(4, 4), stride=(2, 2)),  # eb_col_edge's
          _layer(4, (7, 9), (1, 1), 24, 2),
          _layer(6, (5, 11), (1, 1), 20, 2, act=0),
          _layer(4, (7, 9), (3, 3), 8, 1, pad=(1, 1)),
          _layer(3, (5, 11), (1, 3), 5, 1, act=0),
          _layer(3, (9, 20), (3, 3), 6, 1, pad=(1, 1), stride=(2, 2)),
          _layer(24, (1, 14), (1, 13), 7, 1),
          _layer(3, (9, 13), (1, 1), 1, 1),
          _layer(8, (5, 11), (1, 1), 4, 4, act=0),
          _layer(1, (1, 128), (1, 5), 16, 1, pad=(0, 2)),
          _layer(1, (15, 13), (3, 3), 12, 1, stride=(2, 2)),
          _layer(3, (9, 23), (1, 2), 12, 3, pad=(0, 1)),  # (unpadded: the few-input kernel)
          _layer(3, (4, 97), (1, 9), 3, 3, pad=(0, 4)),
          _dilated(_layer(4, (1, 61), (1, 7), 4, 4, pad=(0, 6), act=0), 2),
          _layer(2, (1, 101), (1, 9), 2, 2, pad=(0, 4), stride=(1, 2))]
FAN, TAP1, LINE, LINE_D2, LINE_S2 = LAYERS[-5:]


def _cases(cfgs, seed: int) -> list:
    rng = np.random.default_rng(seed)
    return [(cfg, *dw_data(cfg, rng), random_bias(rng, cfg["out_c"])) for cfg in cfgs]


def _defines(paths) -> tuple[str, ...]:
    return tuple(f"-DEB_OPT_NO_{path.upper()}" for path in paths)


def m4_path_counts(lib, build, case, path: str, name: str) -> tuple[int, int]:  # noqa: F811
    """A case's firmware built with `path` in and left out: both exact, and their M4
    instruction counts (in, out)."""
    cfg = case[0]
    source = m4_test_program(lib, [case], linears=False)
    counts = []
    for tag, left_out in (("on", ()), ("off", (path,))):
        elf = build_m4(build, f"{name}_{tag}_{cfg['in_c']}_{cfg['out_c']}_{cfg['in_w']}", source,
                       _defines(left_out))
        assert_m4_exact(elf, f"{name}_{tag}")
        counts.append(m4_instructions(build, elf))
    return counts[0], counts[1]


def assert_path_beats(lib, build, cases, path: str, name: str, seed: int,  # noqa: F811
                      bias=random_bias) -> None:
    """Each (cfg, fewer) case with `path` left out and in: exact, and in at least `fewer`
    instructions an output fewer (m4_path_counts); its biases bias(rng, out_c)."""
    rng = np.random.default_rng(seed)
    for cfg, fewer in cases:
        case = (cfg, *dw_data(cfg, rng), bias(rng, cfg["out_c"]))
        counts = m4_path_counts(lib, build, case, path, name)
        outputs = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
        print(cfg["in_c"], cfg["in_w"], counts, (counts[1] - counts[0]) / outputs)
        assert counts[0] <= counts[1] - fewer * outputs, (cfg, counts, outputs)


def _text(elf) -> int:
    out = subprocess.run([ARM_SIZE, str(elf)], capture_output=True, text=True, check=True)
    return int(out.stdout.splitlines()[1].split()[0])


def _predicted(cfg: dict) -> frozenset[str]:
    """The paths a model of this one conv links: kernel_paths, its shift forms, and the
    output forms m4_test_program runs it in (its act, narrow, and wide: the line kernel's
    layers then take the tile kernel, ops.conv_path.line_requantizes, and the few-input
    kernel's the next kernels, few_requantizes)."""
    paths = kernel_paths(plane_of(cfg)) | kernel_paths(plane_of(cfg), lines=False) | \
        kernel_paths(plane_of(cfg), forms=False)
    return paths | shift_forms(paths, -cfg["shift"]) | {"q_wide"} | (
        {"q_relu" if cfg["act"] == 1 else "q_none"}) | (
        {"im2col_s2"} if cfg["stride_w"] == 2 else set())


def _exact_count(build, name: str, source, kept) -> int:
    """The program built (in the m4_build directory) with only the conv paths in kept, run
    exact; its instructions."""
    elf = build_m4(build, name, source, _defines(p for p in CONV_PATHS if p not in kept))
    assert_m4_exact(elf, name)
    return m4_instructions(build, elf)


def test_paths_name_files_the_kernels_know():
    """Every conv path the generator names is one eb_config.h may define away, and one of
    the kernel files tests for (a misspelt path would be left out nowhere)."""
    assert set(CONV_PATHS) <= set(OPTIONAL_PATHS)
    kernels = "".join(p.read_text() for p in KERNELS.glob("eb_*.[ch]"))
    for path in OPTIONAL_PATHS:
        assert f"EB_OPT_NO_{path.upper()}" in kernels, path
    for cfg in LAYERS:
        assert kernel_paths(plane_of(cfg)) <= set(OPTIONAL_PATHS), cfg


def test_shift_forms_name_the_immediate():
    """A layer on the tile kernel (and its fan) links the form of its shift: 8 for right
    shifts 0..8, 16 for 9..16; none outside them (the C loops run), nor off the kernel."""
    fan = kernel_paths(plane_of(FAN))
    assert {"dw_tile", "dw_fan"} <= fan
    assert [shift_forms(fan, s) for s in (0, 8, 9, 16)] == \
        [{"dw_tile8", "dw_fan8"}] * 2 + [{"dw_tile16", "dw_fan16"}] * 2
    assert shift_forms(kernel_paths(plane_of(LAYERS[1])), 12) == {"dw_tile16"}
    assert not shift_forms(fan, 17) and not shift_forms(fan, -1)
    assert not shift_forms(kernel_paths(plane_of(LAYERS[0])), 7)
    line, line_d2 = (kernel_paths(plane_of(cfg)) for cfg in (LINE, LINE_D2))
    assert shift_forms(line, 3) == {"dw_line8"} and shift_forms(line_d2, 16) == {"dw_line16"}


def test_line_kernel_predicted_with_its_biases():
    """The line kernel takes a one-row depthwise of multiplier 1 (dilation 2, stride 2: their
    forms too), not one of multiplier 2, a 3-tap row, a 2-row kernel or stride 3; a bias past its
    limits sends the layer to the tile kernel (line_fits_biases), at the edges exactly (the
    scaled start's, eb_dw_imm_limit, which lies inside the fast range's)."""
    line, line_d2, line_s2 = (plane_of(cfg) for cfg in (LINE, LINE_D2, LINE_S2))
    assert kernel_paths(line) & {"dw_line", "dw_line_d2", "dw_line_s2"} == {"dw_line"}
    assert kernel_paths(line_d2) & {"dw_line", "dw_line_d2", "dw_line_s2"} == \
        {"dw_line", "dw_line_d2"}
    assert kernel_paths(line_s2) & {"dw_line", "dw_line_d2", "dw_line_s2"} == \
        {"dw_line", "dw_line_s2"}
    assert "dw_line" not in kernel_paths(line, lines=False) and \
        "dw_tile" in kernel_paths(line, lines=False)
    for cfg in (_layer(3, (4, 97), (1, 9), 6, 3, pad=(0, 4)), _layer(3, (4, 97), (1, 3), 3, 3),
                _layer(3, (4, 97), (2, 9), 3, 3), _layer(3, (4, 97), (1, 9), 3, 3,
                                                        stride=(1, 3)),
                _dilated(_layer(3, (4, 97), (1, 5), 3, 3, stride=(1, 2)), 2)):
        assert "dw_line" not in kernel_paths(plane_of(cfg)), cfg
    pairs = 5
    assert line_fits_biases(line, (0, -5, 7), -9, True)
    lim = (2**31 - 1 - (2 * pairs << 22)) >> 7  # c = 16, t = 7
    assert line_fits_biases(line, (lim - 2**8,), -9, True)
    assert not line_fits_biases(line, (lim - 2**8 + 1,), -9, True)
    assert line_fits_biases(line, (lim,), -9, False) and \
        not line_fits_biases(line, (lim + 1,), -9, False)
    assert line_fits_biases(line, (-lim,), -9, False) and \
        not line_fits_biases(line, (-lim - 1,), -9, False)
    assert line_fits_biases(line, (5,), -16, True) and line_fits_biases(line, (5,), 0, True)
    assert not line_fits_biases(line, (5,), -17, True) and \
        not line_fits_biases(line, (5,), 1, True)
    edge = 2**31 - 1 - (2 * pairs << 22) - 2**15  # s = 16, t = 0: the start's limit binds
    assert line_fits_biases(line, (edge,), -16, True) and \
        not line_fits_biases(line, (edge + 1,), -16, True)


def test_two_pixel_blocks_predicted_per_pass():
    """"gemm_2px" where a pass's pixel count is 2 mod 4: the whole plane untiled, each row
    tile (and the last, shorter one) tiled."""
    wide2 = plane_of(_layer(8, (5, 4), (1, 3), 8, 1))  # 5 rows of 2 outputs: 10 pixels
    assert two_pixel_block(wide2) and "gemm_2px" in kernel_paths(wide2)
    assert two_pixel_block(wide2, rows=2)  # tiles of 2, 2 and 1 rows: 4, 4, 2 pixels
    even = plane_of(_layer(8, (6, 4), (1, 3), 8, 1))  # 6 rows of 2 outputs: 12 pixels
    assert not two_pixel_block(even) and "gemm_2px" not in kernel_paths(even)
    assert not two_pixel_block(even, rows=2) and not two_pixel_block(even, rows=4)
    assert two_pixel_block(even, rows=3)  # tiles of 3 rows: 6 pixels
    wide4 = plane_of(_layer(8, (6, 6), (1, 3), 8, 1))  # 6 rows of 4 outputs
    assert not any(two_pixel_block(wide4, rows) for rows in (None, 1, 2, 3, 4, 5))
    assert "gemm_2px" not in kernel_paths(wide4)
    odd = plane_of(_layer(8, (3, 1), (1, 1), 8, 1, pad=(0, 0)))  # 3 pixels in all
    assert not two_pixel_block(odd) and two_pixel_block(odd, rows=2)


@needs_m4
def test_m4_left_out_paths_stay_exact(lib, m4_build):  # noqa: F811
    """Each path left out on its own, and all of them at once (every conv then runs the
    reference loops): every layer still comes out exact, and the firmware is smaller by what
    was left out."""
    source = m4_test_program(lib, _cases(LAYERS, 5), linears=False)
    text = {}
    for left_out in ((), *((p,) for p in CONV_PATHS), CONV_PATHS):
        name = "sel_" + ("_".join(left_out) if len(left_out) < 2 else "all")
        elf = build_m4(m4_build, name, source, _defines(left_out))
        assert_m4_exact(elf, name)
        text[left_out] = _text(elf)
    assert text[("dw_three_tap",)] < text[()] - 4000, text
    assert text[("dw_tile",)] < text[()] - 5000, text
    assert text[("dw_column",)] < text[()] - 2000, text
    assert text[("im2col",)] < text[()] - 1000, text
    assert text[CONV_PATHS] < text[()] - 20000, text


@needs_m4
def test_m4_predicted_paths_are_the_ones_taken(lib, m4_build):  # noqa: F811
    """A layer built with only the paths kernel_paths names for it (the rest left out, as a
    model of that one layer links them) runs as fast as with every path linked: the
    prediction names the path the C takes, not a fallback (which would cost several times
    the instructions)."""
    for i, case in enumerate(_cases(LAYERS, 6)):
        cfg = case[0]
        keep = _predicted(cfg)
        source = m4_test_program(lib, [case], linears=False)
        counts = [_exact_count(m4_build, f"all_{i}", source, CONV_PATHS),
                  _exact_count(m4_build, f"only_{i}", source, keep)]
        assert counts[1] <= counts[0] * 1.02, (cfg, sorted(keep), counts)


@needs_m4
def test_m4_tap1_rows_shift_by_an_immediate_where_predicted(lib, m4_build):  # noqa: F811
    """A 1x2 depthwise of multiplier 4 (its frame one tap pair) built with the paths
    kernel_paths names runs its rows by the immediate-shift forms ("dw_tile_tap1"): an
    instruction an output fewer than with that path left out (the rows then shift by a
    register), exact both ways."""
    case = _cases([TAP1], 7)[0]
    cfg = case[0]
    keep = _predicted(cfg)
    source = m4_test_program(lib, [case], linears=False)
    counts = [_exact_count(m4_build, "tap1_on", source, keep),
              _exact_count(m4_build, "tap1_off", source, keep - {"dw_tile_tap1"})]
    outputs = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    assert counts[0] <= counts[1] - outputs * 3 // 4, (sorted(keep), counts, outputs)


@needs_m4
def test_m4_gemm_short_rows_exact(lib, m4_build):  # noqa: F811
    """The GEMM's rows of fewer than 4 weights (eb_dot_short: grouped 1x1s of 2 and 3 inputs a
    group, relu and none, which take them where the few-input kernel does not: left out
    here, as a layer without its forms or with packed weights), with no bias, and with biases so
    near the int32 limit that their rows take the exact requantization, among ordinary
    ones: every output equal to the reference on the M4."""
    cfgs = [_layer(4, (6, 9), (1, 1), 16, 2), _layer(6, (5, 7), (1, 1), 12, 2, act=0),
            _layer(9, (3, 5), (1, 1), 30, 3)]
    rng = np.random.default_rng(8)
    cases = []
    for cfg in cfgs:
        x, w = dw_data(cfg, rng)
        near = rng.integers(-1000, 1000, size=cfg["out_c"]).astype(np.int64)
        near[::3] = 2**31 - 1 - 40  # past the fast sums' limit: the exact rows
        cases += [(cfg, x, w, near.astype(np.int32)), (cfg, x, w, None)]
    # the largest sums (every x and w -128) with biases either side of the fast rows' limit
    # (INT32_MAX - k 2^14 - 2^(s - 1)), one apart, and up to 90 past it (where only the
    # rounding term would overflow a fast sum)
    edge = {**_layer(4, (2, 5), (1, 1), 40, 2), "rounding": 0}  # half up: 2^(s - 1) added
    lim = 2**31 - 1 - 2 * 16384 - (1 << 8)
    bias = np.array([lim + d for d in range(-4, 32)] + [lim + 40, lim + 64, lim + 65, lim + 90],
                    dtype=np.int64)
    x, w = dw_data(edge, rng)
    cases.append((edge, np.full_like(x, -128), np.full_like(w, -128), bias.astype(np.int32)))
    assert all("gemm_short" in kernel_paths(plane_of(c), forms=False) for c in cfgs + [edge])
    m4_convs_exact(lib, m4_build, "gemm_short", cases, _defines(("dw_few",)))
