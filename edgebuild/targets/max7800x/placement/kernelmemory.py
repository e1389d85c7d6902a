"""Kernel memory: each layer with weights holds its kernels in every one of its processors,
from a start word that is the same on all of them.
"""

from __future__ import annotations

import math

from edgebuild.targets.max7800x.hwlayer import HwLayer, pixels
from edgebuild.targets.max7800x.placement.context import Context
from edgebuild.targets.max7800x.placement.maps import bits, spans
from edgebuild.targets.max7800x.placement.records import KernelSlot


class KernelMemory:
    """Every layer's kernel slot (`kernels`, by layer name)."""

    def __init__(self, ctx: Context, procs: dict[str, int]):
        self.layers, self.profile = ctx.layers, ctx.profile
        self.path, self.problem = ctx.path, ctx.problem
        self.procs = procs

    def run(self) -> None:
        """Layers in order, each from the first start word free on all its processors."""
        self.kernels: dict[str, KernelSlot] = {}
        free = [0] * self.profile.processors
        multiple = self.profile.kernel_memory.start_multiple
        for layer in self.layers:
            if not layer.has_weights:
                continue
            processors = bits(self.procs[layer.name])
            words = self.kernel_words(layer)
            start = math.ceil(max(free[p] for p in processors) / multiple) * multiple
            self.kernels[layer.name] = KernelSlot(start, words)
            if self._kernel_fits(layer, processors, start, words):
                for p in processors:  # a layer that does not fit leaves room to the next
                    free[p] = start + words

    def kernel_words(self, layer: HwLayer) -> int:
        """Words per processor: kernels of `elements` weights of `bits` bits, packed
        word_bits // (elements * bits) to a word (a wider kernel takes several words)."""
        word_bits = self.profile.kernel_memory.word_bits
        kernel_bits = layer.kernel_elements * (layer.weight_bits or 8)
        per_word = max(1, word_bits // kernel_bits)
        words_each = math.ceil(kernel_bits / word_bits)
        passes = math.ceil(layer.in_channels / self.procs[layer.name].bit_count())
        kernels = passes if layer.depthwise else layer.out_channels * passes
        if layer.flatten:
            kernels *= pixels(layer.in_shape)
        return math.ceil(kernels / per_word) * words_each

    def _kernel_fits(self, layer: HwLayer, processors: list[int], start: int,
                     words: int) -> bool:
        memory = self.profile.kernel_memory
        short = [p for p in processors if start + words > memory.words_of(p)]
        if short:
            p = short[0]
            self.problem(self.path(layer), f"layer {layer.name!r}: kernel memory runs out on "
                         f"processor {p}: needs words {start}..{start + words - 1} ({words} "
                         f"words from start word {start}), but processor {p} has "
                         f"{memory.words_of(p)} words on {self.profile.name}"
                         + (f" (also processors {spans(short[1:])})" if len(short) > 1 else ""))
        return not short
