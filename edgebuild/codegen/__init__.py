"""The generated C project: kernels copied from templates/, glue rendered with jinja2 from
the plan and the quantized model (each operator's record emits its own calls), and the
export of the model files into a user's firmware tree.

May import: core, ops, manifest, model, memory.
"""
