"""Memory planning: the static activation arena (offsets by tensor lifetime) and the L1
tiler (tiles of output rows x channels whose working set fits the budget).

May import: core, ops, manifest, model.
"""
