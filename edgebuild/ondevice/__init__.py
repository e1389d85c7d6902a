"""On-device training (the host half of onert-micro's two-stage design): which layers
train, the backward graph, the memory it needs, the generated C training code, the PyTorch
reference of its steps, the weight-only file (.wof) and simulated sensor drift.

May import: core, ops, data, manifest, model, train, memory, codegen.
"""
