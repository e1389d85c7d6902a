"""The manifest: one YAML file, sections that map onto stages
(docs/internals/design.md, "The manifest").

These records are the single schema: `schemas/manifest.schema.json` is generated from them
(`edgebuild schema`), and a test fails when the committed copy is stale. Model math
(`model`, `train`) and hardware (`target`) are separate sections so that editing a memory
budget never invalidates training.

The package holds the schema of every section (this module: the whole file and its smaller
sections; `placement`, `ondevice`: those sections; `schema`: the JSON Schema). It knows the
layer fields from the operator records and the dataset sections from the formats.

May import: core, ops, data.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BeforeValidator, Field, model_validator

from edgebuild.core import boundedjson
from edgebuild.core.fields import Bytes, Identifier, Strict
from edgebuild.core.numerics import Rounding
from edgebuild.core.resources import device_profiles
from edgebuild.data import DatasetSpec
from edgebuild.manifest.ondevice import Ondevice
from edgebuild.manifest.placement import LayerPlacement
from edgebuild.ops import Layer

SCHEMA_ID = "https://edgebuild.dev/schemas/manifest.schema.json"


class NumberFormat(StrEnum):
    """The integer format the model computes in (formats.numbers)."""

    edgebuild = "edgebuild"
    tflite = "tflite"


class Model(Strict):
    input: tuple[Annotated[int, Field(strict=True, ge=1, le=65536)], ...] = Field(
        min_length=1, max_length=3,
        description="sample shape, channels first: [features], [C, L] or [C, H, W]")
    layers: tuple[Layer, ...] = Field(min_length=1, max_length=512)
    weights: str | None = Field(
        default=None, min_length=1,
        description="pre-quantized integer weights (.npz, e.g. from `edgebuild import-ai8x`), "
                    "relative to the manifest; the model is then not trained")
    format: NumberFormat = Field(
        default=NumberFormat.edgebuild,
        description="the number format of the integer model: `edgebuild` (its own: "
                    "power-of-two scales, no zero points) or `tflite` (TFLite's int8: zero "
                    "points, per-channel multipliers; `model.weights` from `edgebuild "
                    "import-tflite`; host and cortex-m4 targets)")

    def to_json(self) -> dict[str, Any]:
        """model.json (stage validate; schemas/artifacts/model.v1.schema.json): the section
        with every default resolved."""
        return self.model_dump(mode="json")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Model:
        return cls.model_validate(data)

    @classmethod
    def load(cls, directory: Path) -> Model:
        """The resolved model section the `validate` stage wrote to `directory`."""
        return cls.from_json(boundedjson.read(directory / "model.json"))


class Sgd(Strict):
    lr: float = Field(default=0.01, gt=0, le=10)
    momentum: float = Field(default=0.9, ge=0, lt=1)
    nesterov: bool = False
    weight_decay: float = Field(default=0.0, ge=0, le=1)


class Adam(Strict):
    lr: float = Field(default=0.001, gt=0, le=10)
    betas: tuple[float, float] = (0.9, 0.999)
    weight_decay: float = Field(default=0.0, ge=0, le=1)


class Optimizer(Strict):
    """Exactly one of the keys, e.g. `{adam: {lr: 0.003}}`."""

    sgd: Sgd | None = None
    adam: Adam | None = None
    adamw: Adam | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> Optimizer:
        chosen = [k for k in ("sgd", "adam", "adamw") if getattr(self, k) is not None]
        if len(chosen) != 1:
            raise ValueError(f"choose exactly one optimizer of sgd, adam, adamw (got {chosen or 'none'})")
        return self


class MultiStep(Strict):
    type: Literal["multistep"]
    milestones: tuple[Annotated[int, Field(strict=True, ge=1)], ...] = ()
    gamma: float = Field(default=0.1, gt=0, le=1)


class Cosine(Strict):
    type: Literal["cosine"]
    min_lr: float = Field(default=0.0, ge=0)


class Constant(Strict):
    type: Literal["constant"]


Schedule = Annotated[MultiStep | Cosine | Constant, Field(discriminator="type")]


class Train(Strict):
    epochs: int | None = Field(
        strict=True, default=None, ge=0, le=10000,
        description="unset: sized to the data, about 2000 optimizer steps (3 to 500 epochs); "
                    "0: no training, the float model is `init` as it is")
    patience: int | None = Field(
        strict=True, default=None, ge=1, le=10000,
        description="stop after this many epochs without a better one (the kept epoch: best "
                    "validation accuracy, or lowest training loss with `split.val: 0`)")
    init: str | None = Field(
        default=None, min_length=1,
        description="float weights to start from (.npz as the train stage's float.npz: "
                    "`<layer>.<tensor>`, e.g. from `edgebuild import-onnx`), relative to "
                    "the manifest; training continues from them, or with `epochs: 0` they "
                    "are the float model. QAT or post-training quantization follow as usual")
    batch: int = Field(strict=True, default=64, ge=1, le=65536)
    optimizer: Optimizer = Optimizer(adam=Adam())
    schedule: Schedule = Constant(type="constant")
    clamp_activations: bool = Field(
        default=True, description="clamp activations to the int8 range [-1, 127/128] while "
                                  "training, as the hardware will")
    reproducible: bool = Field(
        default=True, description="train with torch, MKL and oneDNN pinned to x86-64's "
                                  "baseline kernels: the same bytes on any x86-64 machine, "
                                  "at some cost in speed (README, Reproducible builds); "
                                  "false: the fastest kernels of this CPU, whose results "
                                  "differ between CPUs")


def _not_bool(value: object) -> object:
    """YAML `true` is the int 1 to Python; a bit width must be written as a number."""
    if isinstance(value, bool):
        raise ValueError("expected one of 1, 2, 4, 8, not a boolean")
    return value


WeightBits = Annotated[Literal[1, 2, 4, 8], BeforeValidator(_not_bool)]


class LayerQuant(Strict):
    """Per-layer override of the QAT / quantization policy (by layer name)."""

    weight_bits: WeightBits | None = None
    shift_quantile: float | None = Field(default=None, gt=0, le=1)
    bias_bits: int | None = Field(strict=True, default=None, ge=2, le=32)


class Qat(Strict):
    """Quantization policy. With `enabled: false` the weights are quantized after training
    (post-training quantization, see `quantize.clip`) with the same bit widths."""

    enabled: bool = True
    epochs: int | None = Field(strict=True, default=None, ge=1, le=10000,
                               description="unset: sized to the data, about 500 optimizer "
                                           "steps (2 to 200 epochs)")
    lr: float = Field(default=0.0005, gt=0, le=10)
    batch: int | None = Field(strict=True, default=None, ge=1, le=65536, description="default: train.batch")
    weight_bits: WeightBits = 8
    # 24: a batchnorm folded into a layer gives biases of up to a few times the layer's
    # output range, which 16 bits in accumulator units cut off (ACSF1: conv2's folded
    # biases reached 15.4 where 16 bits hold 8; QAT began at 22 %). The CPU kernels add
    # int32 biases; 24 bits leave 7 for the sum of products (a MAC count up to ~130,000
    # per output stays inside int32). MAX7800x targets use the device's own format.
    bias_bits: int = Field(strict=True, default=24, ge=2, le=32,
                           description="bias range in accumulator units (saturated); CPU "
                                       "targets (accelerators use the device's format)")
    shift_quantile: float = Field(default=1.0, gt=0, le=1,
                                  description="quantile of |w| that sets the weight scale")
    overrides: dict[Identifier, LayerQuant] = {}


class ClipMethod(StrEnum):
    max = "max"
    scale = "scale"
    stddev = "stddev"
    avgmax = "avgmax"


class Quantize(Strict):
    rounding: Rounding = Field(default=Rounding.half_up,
                               description="half_up = floor(x + 0.5) as on MAX78000; floor")
    clip: ClipMethod = Field(default=ClipMethod.max,
                             description="post-training quantization only: weight clipping")
    scale: float = Field(default=0.85, gt=0, le=4, description="clip: scale factor")
    stddevs: float = Field(default=3.0, gt=0, le=20, description="clip: stddev multiple")
    calibration: int = Field(strict=True, default=512, ge=1, le=100000,
                             description="training samples used for saturation statistics")


# host and cortex-m4 are generic CPUs; every accelerator comes from a profile file
# (edgebuild/targets/max7800x/profiles/<name>.yaml), so adding a device is a data change.
GENERIC_DEVICES = ("host", "cortex-m4")
if TYPE_CHECKING:
    class Device(StrEnum):
        """mypy's view: the generic CPUs only. The accelerators' members are made from their
        profile files at run time (reach one by value: `Device(name)`)."""

        host = "host"
        cortex_m4 = "cortex-m4"
else:
    Device = StrEnum("Device", {name.replace("-", "_"): name
                                for name in (*GENERIC_DEVICES, *device_profiles())})


class Memory(Strict):
    l1: Bytes = Field(default=64 * 1024, description="fast scratch memory")
    l2: Bytes = Field(default=256 * 1024, description="activation RAM")
    flash: Bytes = Field(default=1024 * 1024, description="code and constant weights")


class Tiling(Strict):
    """How layers that do not fit L1 are cut (see edgebuild/tiling.py)."""

    double_buffer: bool = Field(default=False, description=(
        "two L1 slots: stage the next tile while computing the current one. Worth it only "
        "where a DMA engine copies while the core computes; the generated C copies with the "
        "core itself (eb_dma_copy), so a second slot halves the tiles and hides nothing: "
        "off unless asked for"))


class Target(Strict):
    name: Identifier | None = Field(default=None, description=(
        "when `target` lists several targets: this one's label, naming build/<name>/<label>/ "
        "(default: the device)"))
    device: Device = Device.host
    memory: Memory = Memory()
    tiling: Tiling = Tiling()


class Kat(Strict):
    """A known answer supplied with the model (e.g. another toolchain's sample and output)."""

    input: str = Field(min_length=1, description=".npy int8-range input: one sample or a batch")
    expected: str | None = Field(default=None, min_length=1,
                                 description=".npy expected integer outputs (the other "
                                             "toolchain's known answer); without it the integer "
                                             "reference is the answer")


class Manifest(Strict):
    """One model, from dataset to deployable C project."""

    schema_: str | None = Field(default=None, alias="$schema",
                                description="optional JSON Schema reference for editors")
    name: Identifier
    seed: int = Field(strict=True, default=0, ge=0, le=2**31 - 1)
    dataset: DatasetSpec | None = Field(default=None,
                                        description="required unless model.weights is given")
    model: Model
    train: Train = Train()
    qat: Qat = Qat()
    quantize: Quantize = Quantize()
    target: Target = Target()
    placement: dict[Identifier, LayerPlacement] = Field(
        default={}, description="MAX7800x devices: per-layer processors and data memory offsets, "
                                "keyed by layer name; missing layers are placed automatically")
    kat: Kat | None = None
    ondevice: Ondevice | None = Field(
        default=None, description="fine-tuning on the device: trainable layers, optimizer, "
                                  "loss; generates and verifies C training code")
