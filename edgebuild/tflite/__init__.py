"""TFLite's int8 models (issue 31): reading a `.tflite` file (flatbuffer), translating its
graph into edgebuild's layers (translation), and TFLite's integer number format — zero
points, per-channel fixed-point multipliers — as numpy arithmetic (arith) and per-op
integer reference (reference), bit-exact with LiteRT's reference kernels
(tests/test_tflite_reference.py); its plug-in table for ops.numbers (operators), the check
of its weights file (check) and `edgebuild import-tflite` (importer). May import: core,
ops, data, manifest, model, interchange.
"""
