"""The vendor's network description: MAX78000/MAX78002 networks in the ai8x-synthesis YAML
format, in and out.

`import_network` reads a network description ("sidecar" YAML: one record per hardware layer
with its operation, pooling, processors and data memory offsets), optionally the quantized
ai8x-training checkpoint, a sample input and the toolchain's known answer, and writes an
edgebuild manifest: `model.layers` (what is computed), `placement` (where it runs),
`model.weights` (the checkpoint's integer weights as `weights.npz`) and `kat`.

`export_network` goes the other way: a manifest plus its resolved placement (one entry per
hardware layer) becomes a network description the toolchain reads.

This package owns everything about that format and the checkpoint that goes with it. It
holds no device figure (those come from the device profile, `..profile`: processor counts,
the output shift range, the arch prefix of each device) and no placement rule
(`..placement` checks and completes what an imported manifest says). Modules, in the order
an import runs through them:

- `values`, `spec`: value parsers; the records a description is read into and the
  `Reporter` that collects every problem with its position.
- `layerkeys`, `buffers`, `description`: one layer's keys; data buffers; the document
  (top-level keys, sequence order, what each layer reads).
- `checkpointfile`, `checkpoint`: the quantized `.pth.tar`: the file, read as untrusted
  input (weights-only, size-bounded), and its layers.
- `built`, `layers`, `compute`, `binding`, `hardware`, `channels`: the edgebuild layers of
  each network layer (those with weights in `compute`), bound to the checkpoint, cut into
  hardware layers with their placement entries; channel counts without a checkpoint.
- `text`, `kat`, `files`, `importer`: the manifest text, the known answer, the files
  written, `import_network`.
- `layerrecord`, `export`: `export_network`, one record per hardware layer.
- `quantized`: `export_checkpoint`, the quantized checkpoint that goes with the export (the
  vendor's tool runs on the pair).

May import what `edgebuild.targets` may, and the other `edgebuild.targets.max7800x` modules
(hwlayer, profile); nothing there imports this package.
"""

from edgebuild.targets.max7800x.network.built import identifier
from edgebuild.targets.max7800x.network.channels import map_channels
from edgebuild.targets.max7800x.network.description import DATASETS
from edgebuild.targets.max7800x.network.export import export_network
from edgebuild.targets.max7800x.network.hardware import HardwareLayer, hardware_groups
from edgebuild.targets.max7800x.network.importer import ImportResult, import_network
from edgebuild.targets.max7800x.network.quantized import CHECKPOINT_FILE, export_checkpoint
from edgebuild.targets.max7800x.network.text import flow
from edgebuild.targets.max7800x.network.values import parse_processor_map, popcount

__all__ = [
    "CHECKPOINT_FILE", "DATASETS", "HardwareLayer", "ImportResult", "export_checkpoint", "export_network", "flow", "hardware_groups",
    "identifier", "import_network", "map_channels", "parse_processor_map", "popcount",
]
