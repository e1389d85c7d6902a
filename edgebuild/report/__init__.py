"""Reporting: the report's record, its page and figures, the headline figures, and the
known-answer test results they show (the `report` stage itself is pipeline's).

May import every package below `pipeline`: core, ops, data, manifest, model, train,
memory, codegen, targets, ondevice.
"""
