"""TFLite's int8 number format: fixed-point arithmetic (arith), each layer's integers
(quant), the per-op integer reference bit-exact with LiteRT (reference), the C kernels'
scratch (kernels) and the plug-in table of reference and C emitters (operators). May
import: core, ops, formats.
"""
