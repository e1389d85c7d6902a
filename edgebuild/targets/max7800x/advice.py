"""What to do about a broken device rule: the second half of a MAX7800x `check` message
(`limits.Problem.advice`; the first half says what is wrong).

Each sentence holds for the device profiles as they stand (profiles/*.yaml, from the
vendor's "Limitations of MAX78000/MAX78002 Networks"): a restructuring the rule itself
allows, a placement key, or another device — which `limits.check` finds by running the same
rule on every other profile, so a device is named only where its profile allows the thing.
This module checks nothing; it only words advice.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from edgebuild.targets.max7800x import profile as profiles

if TYPE_CHECKING:
    from edgebuild.targets.max7800x.records import Profile

# Every manifest runs on a CPU target: the integer reference's C, in software.
CPU = "a cortex-m4 target runs it in software (`target.device: cortex-m4`)"


def join(*parts: str) -> str:
    """Pieces of advice, in order, as one clause list ("a; b")."""
    return "; ".join(part for part in parts if part)


def _choices(values: Iterable[object]) -> str:
    """"0, 1 or 2"."""
    items = [str(v) for v in values]
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} or {items[-1]}"


def devices(names: Sequence[str], whole_layer: bool) -> str:
    """Other devices whose profiles allow what this one refuses: the whole layer (no rule
    of theirs refuses it), or at least this rule."""
    what = "runs this layer as it is" if whole_layer else "allows this"
    if len(names) > 1:
        what = what.replace("runs", "run").replace("allows", "allow")
    return f"{' and '.join(names)} {what} (`target.device: {names[0]}`)"


# --- convolutions -------------------------------------------------------------------------

def kernel_2d(kernel: tuple[int, ...], allowed: Sequence[tuple[int, int]], transposed: bool
              ) -> str:
    if transposed:
        return "use kernel 3 (with stride 2, pad 1 and output_pad 1 it doubles height and width)"
    sizes = _choices(f"{k[0]}x{k[1]}" if k[0] != k[1] else str(k[0]) for k in allowed)
    if max(kernel) > max(max(k) for k in allowed):
        return (f"use kernel {sizes}; stacked 3x3 convolutions reach further (two see 5x5, "
                "three 7x7)")
    return f"use kernel {sizes}"


def kernel_1d(limit: int, short: int, dilation: tuple[int, int]) -> str:
    return (f"use at most {limit} taps: stack convolutions, or dilate a kernel of at most "
            f"{short} taps (dilation {dilation[0]}..{dilation[1]})")


def pad(allowed: Sequence[int], wide: int) -> str:
    """`wide`: the channel count above which the allowed pads are these (0: any count)."""
    if wide:
        return f"set pad: {allowed[0]}, or read at most {wide} input channels"
    return f"set pad to {_choices(allowed)}"


def stride(allowed: Sequence[int], transposed: bool) -> str:
    if transposed:
        return f"use stride {allowed[0]} (the device's transposed convolution upsamples by it)"
    if tuple(allowed) == (1,):
        return ("use stride 1 and downsample by pooling instead (a `pool:` on this layer pools "
                "its input first; or a pool layer)")
    return f"use stride {_choices(allowed)}"


def output_pad(allowed: Sequence[int]) -> str:
    return f"use output_pad {_choices(allowed)}"


def dilation(bounds: tuple[int, int]) -> str:
    if bounds == (1, 1):
        return "use dilation 1 (pooling, or stacked convolutions, widen what it sees)"
    return f"use a dilation of {bounds[0]}..{bounds[1]}"


def dilation_1d(kernel: int, short: int, bounds: tuple[int, int]) -> str:
    if kernel > short and bounds == (1, 1):
        return (f"dilate only kernels of at most {short} taps, or use dilation 1 with up to "
                "9 taps")
    return f"use a dilation of {bounds[0]}..{bounds[1]}"


def groups(depthwise: bool) -> str:
    if depthwise:
        return ("use groups: 1, or a depthwise convolution (groups = input = output channels) "
                "followed by a 1x1 convolution that mixes channels")
    return "use groups: 1 (a dense convolution)"


# --- pooling ------------------------------------------------------------------------------

def _stages(size: int, limit: int) -> tuple[int, int] | None:
    """Two window sizes of at most `limit` whose product is `size` (the same windows in
    two pool layers of stride = size), the first as small as possible."""
    return next(((a, size // a) for a in range(2, limit + 1)
                 if size % a == 0 and size // a <= limit), None)


def pool_size(size: tuple[int, ...], limit: int, tiling: bool, square: bool) -> str:
    """A pool window larger than the hardware's: two pool layers whose windows make it up
    (windows side by side, stride = size: with a square-stride device, square windows)."""
    plain = f"use a window of at most {limit} per side"
    if not tiling or (square and len(set(size)) > 1):
        return plain
    stages = [_stages(s, limit) for s in size]
    if any(stage is None for stage in stages):
        return f"{plain} ({'x'.join(map(str, size))} has no two factors of at most {limit})"
    first = "x".join(str(s[0]) for s in stages if s)
    second = "x".join(str(s[1]) for s in stages if s)
    return (f"pool in two steps, size {first} then {second} (stride = size: the same windows; "
            f"an average rounds twice), a pool layer before this one for the first")


def shrink_map(shape: tuple[int, ...], limit: int) -> str:
    """A global pool over a map larger than the hardware's window: a strided pool before it
    that brings every side to `limit` or less (the last values of a side that the stride
    does not divide are left out)."""
    steps = [next((k for k in range(2, limit + 1) if n // k <= limit), 0) if n > limit else 1
             for n in shape]
    if all(steps):
        step = max(steps)
        op = "pool1d" if len(shape) == 1 else "pool2d"
        after = "x".join(str(n // step) for n in shape)
        return (f"bring the map to at most {limit} per side first, e.g. a {op} of size {step} "
                f"before it ({'x'.join(map(str, shape))} -> {after}) or that pooling fused "
                f"into the convolution before (`pool:`); or {CPU}")
    return (f"bring the map to at most {limit} per side first (pool layers, or a `pool:` on a "
            f"convolution before it, of stride up to {limit}); or {CPU}")


def pool_stride(limit: int) -> str:
    return f"use a stride of at most {limit}; pool again in a layer of its own for more"


def square_stride() -> str:
    return "give both dimensions one stride, and pool the rest in a layer of its own"


# --- sizes, operations, streaming, memories -----------------------------------------------

def channels_out(limit: int) -> str:
    return (f"use at most {limit} output channels (or two layers of at most {limit} each "
            "reading the same input, joined by a `concat`)")


def channels_in(limit: int) -> str:
    return f"reduce its input to at most {limit} channels (a 1x1 convolution before it)"


def dimension(limit: int) -> str:
    return (f"downsample to at most {limit} rows and columns before it (a pool layer, or a "
            "`pool:` on the layer before)")


def flatten_elements(limit: int) -> str:
    return (f"reduce C x H x W to at most {limit} first: pool before the linear layer (a "
            "`pool:` on the last convolution, or a global_pool, which leaves C values) or use "
            "fewer channels")


def linear_in(limit: int) -> str:
    return f"reduce its input to at most {limit} features (pooling, or fewer channels)"


def operands(bounds: tuple[int, int]) -> str:
    return (f"add at most {bounds[1]} tensors per add, chaining adds for more (an add of the "
            "first ones, then another adding the rest to it)")


def concat_part(source: str, group: int) -> str:
    return (f"give {source!r} a multiple of {group} channels (its `out`), or list it last in "
            "`inputs`")


def buffer(limit: int) -> str:
    return f"buffer at most {limit} channels (a 1x1 convolution before it reduces them)"


def layer_count() -> str:
    return ("merge layers: a pooling fused into the next convolution (`pool:`) and an add "
            "run in-flight with the conv2d that alone reads it do not count")


def op(operation: str) -> str:
    if operation == "flatten":
        return ("remove it (a linear layer flattens its own input: `flatten: true`), or let "
                f"only linear layers read it; or {CPU}")
    if operation == "reshape":
        return (f"keep the channels and let only single-input layers read it; or {CPU}")
    return CPU


def streaming_order(layer: str) -> str:
    return f"stream the layers before {layer!r} too, or stop streaming at it"


def streaming_count(limit: int) -> str:
    return f"stream only the first {limit} layers (those whose data does not fit otherwise)"


def streaming_elements() -> str:
    return "stream a smaller input: fewer rows or columns (a pool before it) or channels"


def streaming_fifo(limit: int, hwc: int | None) -> str:
    """`hwc`: the FIFOs' channels in HWC when the input is CHW (None: it is HWC)."""
    if hwc is not None and hwc > limit:
        return (f"use HWC (remove the first layer's `data_format: CHW`), whose FIFOs take "
                f"{hwc} channels, or at most {limit} input channels")
    return f"use at most {limit} input channels in the streamed input"


def streaming_op(convolutions: str) -> str:
    return (f"stop streaming before it (only {convolutions} stream), or fuse its pooling into "
            "the next convolution (`pool:`)")


def streaming_pad() -> str:
    return "give it padding (e.g. kernel 3 with pad 1), or end streaming at a padded layer"


def larger(current: str, need: int, figure: Callable[[Profile], int], unit: str) -> str:
    """Other devices with room for `need` where `current` has none: each with its figure."""
    found = [(name, figure(profiles.profile(name))) for name in profiles.DEVICE_NAMES
             if name != current]
    room = [(name, value) for name, value in found if value >= need]
    return ", ".join(f"{name} has {value} {unit} (`target.device: {name}`)"
                     for name, value in room)


# --- placement ----------------------------------------------------------------------------

def same_processors(layer: str, source: str, want: str, have: str) -> str:
    return (f"put both on the same processors: placement.{layer}.processors: {have}, or "
            f"placement.{source}.output_processors: {want} (a pool or passthrough layer "
            "keeps each channel on its processor; a convolution can move it)")


def kernel_memory(layer: str, bits: int, others: str) -> str:
    fewer = (f"fewer bits per weight take fewer words (qat.overrides.{layer}.weight_bits: "
             f"{bits // 2}), " if bits > 1 else "")
    return join(f"{fewer}or fewer channels in or out", others)


def bias_memory(others: str) -> str:
    return join("`bias: false` on layers that can do without one, or another bias_group "
                "with room (placement.<layer>.bias_group)", others)


def data_memory(too_large: bool, others: str) -> str:
    if too_large:
        return join("make the tensor smaller per channel (pool before it) or read it in fewer "
                    "passes (at most 64 channels per pass), or stream the layer's input "
                    "(placement.<layer>.streaming: true)", others)
    return join("remove given in_offset/out_offset values (automatic offsets reuse memory "
                "once a tensor is read for the last time)", others)
