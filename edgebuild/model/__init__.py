"""The model as every stage after validation sees it: the typed graph (shapes, parameters,
MACs), folding to the deployed layers, the quantization policy per layer, the quantized
model with its integer reference, known answers and imported integer weights.

May import: core, ops, data, manifest.
"""
