"""Number formats (issue 31): the integer formats a model computes in, as plugins of the
operator records — edgebuild's own (the records' facets) and TFLite's int8 (formats/tflite:
its arithmetic, per-op integer reference, C kernels' scratch and emitters). numbers is the
registry the build asks. May import: core, ops.
"""
