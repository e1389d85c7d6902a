"""`export_checkpoint`: a quantized edgebuild model as the ai8x quantized checkpoint
(`.pth.tar`) that goes with its exported network description, so the vendor's synthesis tool
(`ai8xize.py --checkpoint-file ... --config-file network.yaml`) can be run on exactly what
edgebuild built, to cross-check its accelerator program.

The toolchain binds checkpoint layers to the description's layers with weights by position,
so the state dict lists them in the order the hardware layers run (the placement's order;
a buffer's shift layer, the only layer the export moves, has no weights). The arithmetic is
the inverse of the import's (see `checkpoint`): weights as they are; edgebuild's bias
`b8 * 128` becomes the raw `b8 * 2**(weight_bits - 1)`; the weight scale exponent is the
`output_shift`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from edgebuild.core.errors import UserError
from edgebuild.targets.max7800x.network.checkpoint import CheckpointLayer, checkpoint_bytes

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

# The checkpoint file written beside ai8x/network.yaml (the toolchain's trained checkpoints
# end in -q.pth.tar; its loader reads any name).
CHECKPOINT_FILE = "checkpoint-q.pth.tar"


def export_checkpoint(arch: str, placement: Mapping[str, Any],
                      weights: Mapping[str, NDArray[Any]],
                      quant: Mapping[str, Any]) -> bytes:
    """The checkpoint of `weights` (weights.npz: `<layer>.weight` int8, `<layer>.bias`
    int32) placed as `placement` (placement.json) with quant.json's rows (`bits`,
    `scale_exp`); `arch` must be the description's arch."""
    rows = {row["name"]: row for row in quant.get("layers", ()) if isinstance(row, dict)}
    layers = [_layer(name, weights, rows.get(name, {})) for name in _weight_order(placement,
                                                                                 weights)]
    if not layers:
        raise UserError("export: the model has no layers with weights")
    return checkpoint_bytes(arch, layers)


def _weight_order(placement: Mapping[str, Any], weights: Mapping[str, Any]) -> list[str]:
    """The layers with weights in the order the hardware layers run (each once)."""
    order: list[str] = []
    for hw in placement.get("layers") or ():
        for member in hw.get("members") or ():
            if f"{member}.weight" in weights and member not in order:
                order.append(member)
    return order


def _layer(name: str, weights: Mapping[str, NDArray[Any]], row: Mapping[str, Any]
           ) -> CheckpointLayer:
    """One layer in the checkpoint's form."""
    import numpy as np

    bits = int(row.get("bits", 8))
    shift = int(row.get("scale_exp", 0))
    weight = np.asarray(weights[f"{name}.weight"]).astype(np.int64)
    bias = weights.get(f"{name}.bias")
    return CheckpointLayer(name, f"{name}.op.weight", weight,
                           None if bias is None else _raw_bias(name, np.asarray(bias), bits),
                           None if bias is None else f"{name}.op.bias", shift, bits)


def _raw_bias(name: str, bias: NDArray[Any], bits: int) -> NDArray[np.int64]:
    """edgebuild's `b8 * 128` as the checkpoint stores it: `b8 * 2**(bits - 1)` (the loader
    divides by that and floors, giving b8 back exactly)."""
    import numpy as np

    b = bias.astype(np.int64)
    if np.any(b % 128):
        raise UserError(f"export: {name}.bias holds values that are not multiples of 128: the "
                        "device adds 8-bit biases times 128 (is this a MAX7800x quantization?)")
    return (b // 128) * (1 << (bits - 1))
