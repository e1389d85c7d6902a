"""How an operator's C is written: the record an emitter receives (`CStep`), what it returns
(`CCode`), and the interface of the static kernels in templates/kernels/ that every emitter
calls — enum names, parameter structs, tile declarations — written once.

Emitters build strings only; codegen.project decides where they go (declarations before
`cnn_init`, calls inside `cnn_run_steps`, preludes once after the L1 scratchpad).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Protocol, TypeVar

from edgebuild.core import packing
from edgebuild.core.geometry import Plane, Shape
from edgebuild.core.numerics import Activation, QuantParams, pool_rounding, requantize_rounding


@dataclass(frozen=True)
class Tile:
    """The L1 tile the plan chose for a tiled pass: output rows x output channels."""

    rows: int
    channels: int


class Named(Protocol):
    """What every step's layer record has (ops.operator.LayerBase, which this module
    cannot import: the operator record imports it)."""

    @property
    def name(self) -> str: ...


class Activated(Named, Protocol):
    """A layer whose output goes through an activation (compute layers, add)."""

    @property
    def act(self) -> Activation: ...


L = TypeVar("L", bound=Named, covariant=True)  # the layer record of a step's op


@dataclass(frozen=True)
class CStep(Generic[L]):
    """One deployed step as its emitter sees it. `inputs`/`output`/`scratch` are C
    expressions of arena tensors; `tile`/`pool_tile` are set when the plan tiles the layer
    (or its fused input pooling) through L1; `optimized`: the target has the Cortex-M4
    dual-MAC kernels. Each op's emitter takes the step of its own layer record
    (`CStep[Conv2d]`, ...)."""

    layer: L
    in_shapes: tuple[Shape, ...]
    out_shape: Shape
    quant: QuantParams | None
    rounding: str
    inputs: tuple[str, ...]
    output: str
    scratch: str | None
    tile: Tile | None
    pool_tile: Tile | None
    double_buffer: bool
    optimized: bool
    state: str | None = None  # the static array of a layer's state kept across inferences
    prefix: str = ""  # of every global symbol: the model's name and "_"
    numbers: Any = None  # another number format's record of the layer (formats.numbers)

    def symbol(self, kind: str) -> str:
        """The C name of this layer's file-local object `kind` (P params, T_TILE tile, ...)."""
        return f"{kind}_{self.layer.name}"

    def weights(self, part: str = "w") -> str:
        """The layer's global weight ("w") or bias ("b") array (weights.h)."""
        return weight_symbol(self.prefix, part, self.layer.name)


def weight_symbol(prefix: str, part: str, layer: str) -> str:
    """The global array of a layer's weights ("w") or bias ("b"): weights.c defines it."""
    return f"{prefix}{part}_{layer}"


@dataclass(frozen=True)
class CCode:
    """An emitter's result. `preludes`: (order, text) blocks the project needs once, placed
    after the L1 scratchpad in `order` (the same block from several layers appears once).
    `paths`: optional kernel paths the step runs (OPTIONAL_PATHS, PATH_FILES); a project
    leaves out those no step needs. `scratch`: int16 scratch elements (C expressions) the
    step's calls need beyond its op's `scratch` facet (the optimized kernels' workspace is
    the largest)."""

    decls: tuple[str, ...] = ()
    calls: tuple[str, ...] = ()
    preludes: tuple[tuple[int, str], ...] = ()
    paths: frozenset[str] = frozenset()
    scratch: tuple[str, ...] = ()

    def __add__(self, other: CCode) -> CCode:
        return CCode(self.decls + other.decls, self.calls + other.calls,
                     self.preludes + other.preludes, self.paths | other.paths,
                     self.scratch + other.scratch)


# Kernel paths a project compiles only when a step needs them (eb_config.h defines
# EB_OPT_NO_<PATH> otherwise): the optimized depthwise convolution (eb_dw_opt.c), within it
# the 3-tap (their rows two channels a pass: "dw_three_tap_pair"; a lone channel's 1-D rows in
# quads: "dw_three_tap_line"), tile (and the tile
# kernel's loops specialised to a frame: conv_path.tile_paths,
# its row functions' and its fan's of one input channel's many outputs forms shifting by 8
# or 16: "dw_tile8", "dw_tile16", "dw_fan8", "dw_fan16", ops.conv_path.shift_forms -- its dense
# and grouped convs: "dw_group"),
# column kernels (at stride 2 along the rows: "dw_column_s2"; one channel's rows two at a time:
# "dw_column_rows2"), the line kernel (its forms by the
# immediate 8 or 16, "dw_line8" / "dw_line16", of dilation 2, "dw_line_d2", and of stride 2,
# "dw_line_s2") and table kernels
# (ops.conv_path.kernel_paths); the optimized
# kernels' packed-weight loops, im2col conv (its strided gathers: "im2col_s2"; a padded conv's
# band, "im2col_band"; its GEMM rows
# for blocks of 2 pixels: "gemm_2px"; its rows of fewer than 4 weights: "gemm_short") and the
# register-requantizing rows of linear layers
# ("linear_q") (eb_kernels_opt.c); the dot blocks that
# requantize from the registers to each output form, relu, none, abs or wide int32
# (eb_kernels_opt.c, eb_pw_opt.c; ops.conv.optimized_paths); the max and average pooling
# loops (eb_pool_opt.c; pool_call). TFLite's number format (eb_tfl_opt.c;
# formats.tflite.paths): its depthwise path, the 3x3 assembly of stride 1 and 2 and the
# strip kernel, the pair, record and int8-weight GEMMs, the clamping assembly forms, the
# linear kernels of 1-2 outputs, word-aligned rows and any rows, the global average and the
# max and average window pools.
OPTIONAL_PATHS = ("depthwise", "dw_three_tap", "dw_three_tap_pair", "dw_three_tap_line",
                  "dw_tile", "dw_tile_one",
                  "dw_tile_s1", "dw_tile_s2", "dw_tile_pair_s1", "dw_tile_pair_s2",
                  "dw_tile_pair", "dw_tile_tap1", "dw_tile_long", "dw_tile_fix2", "dw_tile_fix3",
                  "dw_tile_fix4", "dw_tile_fix2_s2", "dw_tile_fix3_s2", "dw_tile_fix4_s2",
                  "dw_tile8", "dw_tile16",
                  "dw_fan", "dw_fan8", "dw_fan16", "dw_group", "dw_column", "dw_column_s2",
                  "dw_column_dense", "dw_column_rows2", "dw_column_copy", "dw_table", "dw_line", "dw_line8",
                  "dw_line16",
                  "dw_line_d2", "dw_line_s2", "dw_few", "dw_few8", "dw_few16", "dw_s2",
                  "dw_small",
                  "packed",
                  "im2col", "im2col_s2", "im2col_band", "gemm_2px", "gemm_short", "linear_q",
                  *(f"linear_k{k}" for k in range(4, 13)),
                  "q_relu", "q_none", "q_abs", "q_wide",
                  "pool_max", "pool_avg",
                  "tfl_depthwise", "tfl_dw3_s1", "tfl_dw3_s2", "tfl_dw3_strip",
                  "tfl_gemm_pairs", "tfl_gemm4", "tfl_gemm8", "tfl_clamp", "tfl_fc_narrow",
                  "tfl_fc_aligned", "tfl_fc4", "tfl_pool_global", "tfl_pool_max",
                  "tfl_pool_avg")
# Kernel files a project gets only when a step runs their path: (sources, headers).
PATH_FILES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "pointwise": (("eb_pw_opt.c",), ("eb_pw_opt.h",)),  # ops.conv: 1x1 convolutions
    # ops.global_pool, on every CPU: the reference and optimized kernels in one file
    "global_pool": (("eb_global_pool.c",), ("eb_global_pool.h",)),
    # TFLite's number format (edgebuild.formats.tflite.operators): its kernels, and on a Cortex-M4
    # the dual-MAC ones
    "tflite": (("eb_tfl.c",), ("eb_tfl.h",)),
    "tflite_opt": (("eb_tfl_opt.c",), ()),
}


def packed_bits(step: CStep[Named]) -> int:
    """The layer's weight width when weights.c stores its weights packed (1, 2, 4 bits:
    core.packing), else 0 (one int8 per weight): the kernels' `wbits` / `bits`."""
    assert step.quant is not None
    return step.quant.bits if packing.packed(step.quant.bits) else 0


def rounding_name(mode: str) -> str:
    """EB_ROUND_HALF_UP / EB_ROUND_FLOOR / EB_ROUND_TRUNC (eb_kernels.h)."""
    return f"EB_ROUND_{mode.upper()}"


def act_name(act: str) -> str:
    """EB_ACT_NONE / EB_ACT_RELU / EB_ACT_ABS (eb_kernels.h)."""
    return f"EB_ACT_{str(act.value if hasattr(act, 'value') else act).upper()}"


def pool_mode_name(mode: StrEnum) -> str:
    """EB_POOL_MAX / EB_POOL_AVG (eb_kernels.h)."""
    return f"EB_POOL_{str(mode.value).upper()}"


def requantize(step: CStep[Activated]) -> str:
    """`shift, rounding, act` arguments of a narrow (int8) compute kernel."""
    assert step.quant is not None
    return (f"{step.quant.shift}, {rounding_name(requantize_rounding(step.rounding))}, "
            f"{act_name(step.layer.act)}")


def initializer(ctype: str, symbol: str, fields: list[tuple[str, object]]) -> str:
    """`static const T symbol = {.a = 1, .b = 2, ...};`: designated, so the declaration
    reads without the struct at hand and survives a field reordering. Wrapped at 96
    columns, four fields' worth of indentation."""
    lines, line = [], "   "
    for name, value in fields:
        item = f" .{name} = {value},"
        if len(line) + len(item) > 96:
            lines.append(line)
            line = "   "
        line += item
    lines.append(line.rstrip(",") + "};")
    return f"static const {ctype} {symbol} = {{\n" + "\n".join(lines)


def tile_decl(symbol: str, tile: Tile, double_buffer: bool) -> str:
    return initializer("eb_tile", symbol, [("rows", tile.rows), ("channels", tile.channels),
                                           ("double_buffer", 1 if double_buffer else 0)])


def conv_params(symbol: str, plane: Plane, step: CStep[Activated]) -> str:
    """The eb_conv_params of a convolution (eb_kernels.h)."""
    assert step.quant is not None
    fields = [(name, getattr(plane, name)) for name in (
        "in_c", "in_h", "in_w", "out_c", "out_h", "out_w", "k_h", "k_w", "stride_h",
        "stride_w", "pad_h", "pad_w", "dil_h", "dil_w", "groups")]
    fields += [("shift", step.quant.shift),
               ("rounding", rounding_name(requantize_rounding(step.rounding))),
               ("act", act_name(step.layer.act))]
    if packed_bits(step):  # int8 weights leave wbits 0
        fields.append(("wbits", packed_bits(step)))
    return initializer("eb_conv_params", symbol, fields)


def pool_params(symbol: str, plane: Plane, mode: StrEnum, rounding: str) -> str:
    """The eb_pool_params of a pooling window (eb_kernels.h)."""
    fields: list[tuple[str, object]] = [("c", plane.in_c)]
    fields += [(name, getattr(plane, name)) for name in (
        "in_h", "in_w", "out_h", "out_w", "k_h", "k_w", "stride_h", "stride_w")]
    fields += [("mode", pool_mode_name(mode)),
               ("rounding", rounding_name(pool_rounding(rounding)))]
    return initializer("eb_pool_params", symbol, fields)


def pool_call(symbol: str, tile_symbol: str, tile: Tile | None, double_buffer: bool,
              source: str, target: str, optimized: bool = False, mode: str = "max") -> CCode:
    """eb_pool2d (EB_POOL2D: eb_pool2d_opt with the optimized kernels), whole or through
    eb_pool2d_tiled (eb_pool2d_tiled_k on EB_POOL2D_KERNEL with the optimized kernels; the
    pool params are declared apart). `mode` ("max" or "avg") names the optimized loops the
    call runs (path "pool_max" / "pool_avg": a project links those its pools take)."""
    paths = frozenset({f"pool_{mode}"} if optimized else ())
    if tile is None:
        kernel = "EB_POOL2D" if optimized else "eb_pool2d"
        return CCode(calls=(f"{kernel}(&{symbol}, {source}, {target});",), paths=paths)
    if optimized:  # EB_POOL2D_KERNEL: eb_pool2d_opt, or eb_pool2d (-DEB_REFERENCE_KERNELS)
        return CCode((tile_decl(tile_symbol, tile, double_buffer),),
                     (f"eb_pool2d_tiled_k(&{symbol}, &{tile_symbol}, EB_POOL2D_KERNEL, {source}, "
                      f"{target}, eb_l1.bytes);",), paths=paths)
    return CCode((tile_decl(tile_symbol, tile, double_buffer),),
                 (f"eb_pool2d_tiled(&{symbol}, &{tile_symbol}, {source}, {target}, "
                  "eb_l1.bytes);",))


def bias_symbol(step: CStep[Named]) -> str:
    """The layer's bias array, or NULL."""
    assert step.quant is not None
    return step.weights("b") if step.quant.bias is not None else "NULL"

