"""TFLite's int8 models (issue 31): reading a `.tflite` file (flatbuffer), translating its
graph into edgebuild's layers (translation), `edgebuild import-tflite` (importer) and the
check of a model's TFLite weights file (check). The number format itself — arithmetic,
integer reference, C emitters — is formats/tflite. May import: core, ops, formats, data,
manifest, model, interchange.
"""
