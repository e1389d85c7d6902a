"""Placement on a MAX7800x-style device: processors, data memory, kernel and bias memory.

`resolve` checks what the manifest's `placement` section gives and chooses the rest, so a
model without any placement gets a complete one. Every figure comes from the device
profile. Conventions (the ai8x network description's, see the synthesis manual):

- Processor maps are ints, bit p = processor p. A layer's `processors` read its input; its
  `output_processors` say where its output is written, and the next layer reads there.
  C channels use passes = ceil(C / processors) and need C processors in one pass, else
  ceil(C / passes) rounded up to a multiple of `processors_per_memory` (100 -> 52).
- Data memory: processor p reads memory instance p // processors_per_memory. HWC (every
  tensor but a CHW model input): one 32-bit word holds the channels of the processors
  sharing an instance; a tensor takes passes * pixels words in each instance its processors
  touch (4 words per value for a 32-bit `wide` output), word k at byte
  offset + 4 * k * (write_gap + 1). CHW model input: one channel per instance, packed
  4 values per word, ceil(pixels / 4) words.
- Element-wise operands are interleaved: operand i is written at base + 4 * i with
  write_gap = operands - 1 and the element-wise layer reads from base. Concatenated inputs
  sit at one offset on adjacent processors (earlier inputs on lower processors).
- A written tensor must not overlap a tensor still needed (one read later, or the model
  output); each tensor is needed from the step that writes it to its last reader. A layer
  may write over its own input where edgebuild.targets.max7800x.overlap proves every value overwritten was
  read for the last time (given offsets only: the toolchain's `--overlap-data`).
  Automatic offsets never overlap: they try the manual's ping-pong (0 / half the instance)
  first, then the lowest free offset.
- A concatenation of more channels than there are processors is read in passes, one input
  per pass: input i is written at base + 4 * i with write_gap = inputs - 1, on the first
  processors of the reading layer (every input but the last fills them).
- Automatic processors: a layer reads where its input is; the model input sits on
  processors 0, 1, ... (HWC) or 0, 4, 8, ... (CHW, one per instance); an output goes where
  its reader's given processors are, else (the last layer) on processors 0, 1, ..., else on
  the first whole instances its layer's inputs do not use.
- Kernel memory: the vendor's synthesis tool's rule (see `kernelmemory`), which the
  accelerator program fills with the weights: layers on all 64 processors first, then in
  order, each at the first column (a multiple of 4), the same on all its processors, from
  which its kernels fit; a layer counts every output processor from its first to its last,
  in every pass.
- Bias memory: out_channels bytes (and lead bytes) in one quadrant's bias memory, allocated
  by the manual's modified fit-first descending after the depthwise layers, whose biases
  are spread over every quadrant they read with (see `biasmemory`).
- With the quantized weights (`sharing`, the plan stage and the program), equal tensors
  are stored once and all-zero biases not at all, as the vendor's tool stores them.
- Streaming: data read only by streaming layers comes through the FIFOs (model input) or
  rolling buffers the hardware manages, so it takes no region here.

Modules: `records` (the resolved placement as records, JSON and a manifest section), `text`
(the maps for people), `maps` (processor maps), `regions` (data memory regions and when two
share a byte); the resolution: `context` (what every step shares: layers, entries,
problems), `processors`, `datamemory`, `kernelmemory`, `biasmemory`, and `resolve`, which
runs them in that order; `sharing` (what the weight values decide).

May import what `edgebuild.targets` may, and hwlayer, limits (its `Problem`) and overlap.
"""

from edgebuild.targets.max7800x.limits import Problem
from edgebuild.targets.max7800x.placement.maps import bits, hexmap, mask
from edgebuild.targets.max7800x.placement.records import (
    FIELDS,
    BiasSlot,
    KernelSlot,
    LayerPlan,
    Placement,
)
from edgebuild.targets.max7800x.placement.regions import Region, collide
from edgebuild.targets.max7800x.placement.resolve import resolve

__all__ = ["FIELDS", "BiasSlot", "KernelSlot", "LayerPlan", "Placement", "Problem", "Region",
           "bits", "collide", "hexmap", "mask", "resolve"]
