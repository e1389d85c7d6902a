"""What every part of one resolve shares: the hardware layers, the manifest's placement
entries (checked against the hardware layers), the device profile, and every problem found,
each at a path into the manifest document.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Literal, overload

from edgebuild.model.folding import fold_layers
from edgebuild.targets.max7800x.hwlayer import HwLayer, manifest_index
from edgebuild.targets.max7800x.limits import ManifestPath, Problem

if TYPE_CHECKING:
    from edgebuild.manifest import Manifest
    from edgebuild.manifest.placement import LayerPlacement
    from edgebuild.targets.max7800x.records import Profile

# The fields of a placement entry (manifest.placement.LayerPlacement), those with int values
# first.
IntKey = Literal["processors", "output_processors", "in_offset", "out_offset", "write_gap",
                 "read_gap"]
Key = IntKey | Literal["data_format", "bias_group", "streaming"]


class Context:
    """The state of one resolve: the hardware layers, the user's entries, every problem."""

    def __init__(self, layers: tuple[HwLayer, ...], manifest: Manifest, profile: Profile):
        self.layers, self.manifest, self.profile = layers, manifest, profile
        self.step = {layer.name: i for i, layer in enumerate(layers)}
        self.index = manifest_index(manifest.model.layers)
        self.problems: list[Problem] = []
        self.entries = self._entries()

    @overload
    def given(self, name: str, key: IntKey) -> int | None: ...

    @overload
    def given(self, name: str, key: Literal["data_format"]) -> Literal["HWC", "CHW"] | None: ...

    @overload
    def given(self, name: str, key: Literal["bias_group"]) -> int | tuple[int, ...] | None: ...

    @overload
    def given(self, name: str, key: Literal["streaming"]) -> bool | None: ...

    @overload
    def given(self, name: str, key: Key) -> int | str | tuple[int, ...] | bool | None: ...

    def given(self, name: str, key: Key) -> int | str | tuple[int, ...] | bool | None:
        """The user's value of field `key` of layer `name`'s entry (None: not given)."""
        entry = self.entries.get(name)
        if entry is None or key not in entry.model_fields_set:
            return None
        value: int | str | tuple[int, ...] | bool | None = getattr(entry, key)
        return value

    def path(self, layer: HwLayer, key: Key | None = None) -> ManifestPath:
        """The user's field when given, else the manifest layer."""
        if key is not None and self.given(layer.name, key) is not None:
            return ("placement", layer.name, key)
        return ("model", "layers", self.index[layer.anchor])

    def problem(self, path: ManifestPath, message: str, advice: str = "") -> None:
        """A problem at `path`: what is wrong, and what to do (limits.Problem)."""
        self.problems.append(Problem(path, message, advice))

    def _entries(self) -> dict[str, LayerPlacement]:
        hw = {layer.name for layer in self.layers}
        owner = {m: layer.name for layer in self.layers for m in layer.members}
        entries = {}
        for key, entry in self.manifest.placement.items():
            if key in hw:
                entries[key] = entry
            else:
                self.problem(("placement", key), self._stray_key(key, owner))
        return entries

    def _stray_key(self, key: str, owner: dict[str, str]) -> str:
        layers = {layer.name: layer for layer in self.manifest.model.layers}
        _, alias = fold_layers(self.manifest.model.layers)
        if key in owner:
            why = {"flatten": "the hardware flattens inside the linear layer",
                   "add": "the element-wise add runs in-flight in the convolution"}.get(
                layers[key].op, "it is not a hardware layer by itself")
            return (f"placement key {key!r} names a layer that is part of hardware layer "
                    f"{owner[key]!r} ({why}); place {owner[key]!r} instead")
        if key in alias:
            target = alias[key]
            into = owner.get(target, target)
            what = "removed for inference" if layers[key].op == "dropout" else \
                f"folded into {into!r}"
            return f"placement key {key!r} names a {layers[key].op} layer, which is {what}"
        if key in layers:
            return f"placement key {key!r} names a layer that needs no hardware layer"
        names = [layer.name for layer in self.layers]
        hint = difflib.get_close_matches(key, names, n=1, cutoff=0.5)
        return (f"placement key {key!r} names no layer" +
                (f"; did you mean {hint[0]!r}?" if hint else "") +
                f" (hardware layers: {', '.join(names)})")

    def check_fields(self) -> None:
        for i, layer in enumerate(self.layers):
            if i and self.given(layer.name, "data_format") is not None:
                self.problem(("placement", layer.name, "data_format"),
                             f"layer {layer.name!r}: data_format applies to the first layer "
                             f"only ({self.layers[0].name!r}); every other layer reads HWC")
            if not layer.has_bias and self.given(layer.name, "bias_group") is not None:
                self.problem(("placement", layer.name, "bias_group"),
                             f"layer {layer.name!r} has no bias; remove bias_group")

    def data_format(self) -> str:
        return self.given(self.layers[0].name, "data_format") or "HWC"
