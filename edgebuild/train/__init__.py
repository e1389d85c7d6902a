"""Training on the host: the PyTorch network built from operator records, the training
loop shared by float training and QAT, and the figures people read (curves, confusion).

May import: core, ops, data, manifest, model.
"""
