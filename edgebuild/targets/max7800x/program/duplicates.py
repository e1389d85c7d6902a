"""Duplicates: layers whose kernels or bias the accelerator program stores only once.

The vendor's synthesis tool deduplicates by default (its kdedup, run after every change it
makes to the kernels): a layer whose tensor equals an earlier layer's gets no memory of its
own and uses the earlier layer's. A user who reuses a block's weights (a layer applied twice,
a shared classifier) gets half the kernel memory from the vendor's tool, and expects the same
here; "identical" to its program needs the same choice. The tool's rule, which this module
decides once for the program (placement and registers only follow the mapping):

- two tensors are equal when their shapes and all their values are; a subset or a prefix of
  another tensor is never shared;
- kernels must also have the same weight width and the same input processor map (the kernel
  memory they would share is the same columns of the same processors), biases need nothing
  more: a bias is shared even between layers on different processors;
- a duplicate uses the first equal layer, which is itself never a duplicate;
- the shapes compared are the tool's, not PyTorch's: a convolution's input and output
  channels are one axis (out x in, kernel...), so (8, 16, 3, 3) and (16, 8, 3, 3) kernels
  with the same values and the same processor map are "equal", and the duplicate then runs
  with the first layer's kernel count; a linear layer's weights stay (1, out, in).
The decision needs the weight values: `sharing` reduces them to the placement's record
(placement.sharing), which the plan stage (maps.txt, plan.json, the report) and the program
place with; `check`, before any weights, places every layer's tensors as its own.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from edgebuild.targets.max7800x.placement.kernelmemory import holds_kernels
from edgebuild.targets.max7800x.placement.sharing import Sharing
from edgebuild.targets.max7800x.program.geometry import layer_weights

if TYPE_CHECKING:
    from edgebuild.targets.max7800x.hwlayer import HwLayer


def sharing(hw: Sequence[HwLayer], weights: Mapping[str, np.ndarray],
            streamed: Sequence[bool] | None = None) -> Sharing:
    """What the quantized `weights` (as the quantize stage stores them: `<layer>.weight`,
    `<layer>.bias` = the 8-bit bias x 128) decide: equal kernels, and each bias stored
    (not all zeros) or shared. `streamed` (placement.kernelmemory.streamed): the layers
    whose 1x1 kernels run as 3x3; the vendor's tool compares them in that form, so such a
    kernel and an equal 1x1 kernel that does not stream are two kernels."""
    wide = streamed or [False] * len(hw)
    kernels = [stored_kernel(layer_weights(layer, weights[f"{layer.name}.weight"], square))
               if layer.has_weights and holds_kernels(layer)
               and f"{layer.name}.weight" in weights else None
               for layer, square in zip(hw, wide, strict=True)]
    biases = [stored_bias(weights.get(f"{layer.name}.bias")) for layer in hw]
    return Sharing(originals(kernels), tuple(
        None if bias is None else source
        for bias, source in zip(biases, originals(biases), strict=True)))


def stored_bias(bias: np.ndarray | None) -> np.ndarray | None:
    """The 8-bit values the bias memory holds of a stored bias (x 128 undone), None when
    nothing is stored: no bias, or all zeros."""
    if bias is None:
        return None
    values = np.floor_divide(bias.astype(np.int64), 128)
    return values if np.any(values != 0) else None


def originals(arrays: Sequence[np.ndarray | None],
              keys: Sequence[Hashable] | None = None) -> tuple[int, ...]:
    """Per layer, the layer whose stored tensor it uses: the first earlier layer with an
    equal array (shape and values) and an equal key, else itself (also for None: no
    tensor). `keys` (e.g. weight width and processor map for kernels) must match too."""
    result: list[int] = []
    for i, array in enumerate(arrays):
        result.append(i if array is None else next(
            (j for j in range(i) if result[j] == j and _same(arrays[j], array)
             and (keys is None or keys[j] == keys[i])), i))
    return tuple(result)


def _same(first: np.ndarray | None, second: np.ndarray) -> bool:
    return first is not None and first.shape == second.shape \
        and bool(np.array_equal(first, second))


def stored_kernel(weight: np.ndarray) -> np.ndarray:
    """A layer's kernels in the shape the vendor's tool compares (its checkpoint loader's):
    a linear layer's (out, in) with a leading axis of 1, a convolution's (out, in, k...) with
    its channel axes merged. `weight` is already in the device's layout (a transposed
    convolution's flipped and swapped)."""
    if weight.ndim == 2:
        return weight[np.newaxis]
    return weight.reshape((-1, *weight.shape[2:]))
