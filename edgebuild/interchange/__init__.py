"""ONNX in and out: the float, fake-quant and integer models written as ONNX beside their
checkpoints (`export`, from each op's `onnx` facet), and a float ONNX model read into a
manifest and float weights the pipeline starts from (`edgebuild import-onnx`: `onnxfile`
reads the file, `folding` folds its constants, `nodes` maps each ONNX operator onto layers
in the working state of `translation`, `importer` drives it and writes the manifest). The
file is untrusted input: `limits` bounds what it may ask for, `wire` checks its protobuf
encoding against those limits before it is decoded.

onnx is imported inside functions only: a no-op build never loads it.

May import: core, ops, data, manifest, model.
"""
