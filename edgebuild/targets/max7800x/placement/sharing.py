"""Sharing: what the weight values decide about kernel and bias memory.

Everything else in the placement follows from shapes, but the vendor's synthesis tool also
looks at the values: a weight tensor equal to an earlier layer's is stored once (its
deduplication), and a bias that is all zeros is not stored at all. Only a quantized model
has values, so `check` places without this record (every layer its own kernels and bias)
and the plan stage and the accelerator program place with it: what maps.txt, plan.json and
the report show after quantize is what the program loads.

The record holds value facts only: whether two equal kernel tensors may share memory also
depends on the processors they run on, which the placement decides (`kernel_sources`).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sharing:
    """Per hardware layer, in network order: `kernels[i]`, the first layer whose kernel
    tensor (in the vendor tool's compared shape) equals layer i's, i itself when none does
    or it holds no kernels; `biases[i]`, the layer whose stored bias layer i uses (i itself
    or an earlier layer with an equal one), None when layer i stores none (no bias, or all
    zeros)."""

    kernels: tuple[int, ...]
    biases: tuple[int | None, ...]


def first_equal(classes: Sequence[Hashable], keys: Sequence[Hashable] | None = None
                ) -> tuple[int, ...]:
    """Per item, the first earlier item of the same class (and key) that is itself no
    duplicate, else the item itself: the deduplication's rule, on values reduced to a class
    (equal tensors, equal class)."""
    result: list[int] = []
    for i, cls in enumerate(classes):
        result.append(next((j for j in range(i) if result[j] == j and classes[j] == cls
                            and (keys is None or keys[j] == keys[i])), i))
    return tuple(result)


def kernel_sources(sharing: Sharing | None, keys: Sequence[Hashable | None]
                   ) -> tuple[int, ...]:
    """Per layer, the layer whose kernel slot it runs with: equal kernels share a slot when
    they also have the same key (the weight width and input processors: the same columns
    of the same memories); `keys[i]` None: layer i holds no kernels (its own)."""
    if sharing is None:
        return tuple(range(len(keys)))
    classes = [sharing.kernels[i] if key is not None else ("own", i)
               for i, key in enumerate(keys)]
    return first_equal(classes, keys)
