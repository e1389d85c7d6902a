"""The `buffer` op: a rolling window of per-frame features kept across inferences.

Unit tests pin its shape rules and graph rules (one buffer, no layer reading both sides,
the output after it), the clip layout of `dataset.frames`, and that torch and the integer
reference gather frames the same way. The end-to-end test builds a streaming model and
feeds its C code a continuous stream without resets: after every frame, the output must
equal the integer reference on the window of the last `length` frames."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import build_json, run_cli

from edgebuild.data.dataset import DataFileError, framed, framed_shape
from edgebuild.manifest import Model
from edgebuild.model import graph as graphs
from edgebuild.ops.operator import Mode
from edgebuild.train.network import Net


def layers(*specs):
    return Model.model_validate({"input": [1], "layers": list(specs)}).layers


FRAME = [{"name": "f", "op": "conv1d", "out": 4, "kernel": 3}]
TAIL = [{"name": "t", "op": "conv1d", "out": 2, "kernel": 3}]


def problems(input_shape, specs):
    return [p.message for p in graphs.build(tuple(input_shape), layers(*specs))[1]]


def test_buffer_turns_frame_features_into_a_window():
    graph, found = graphs.build((3, 3), layers(*FRAME, {"name": "w", "op": "buffer", "length": 5},
                                               *TAIL))
    assert not found
    assert [n.out_shape for n in graph.nodes] == [(4, 1), (4, 5), (2, 3)]
    assert graphs.frames(layers(*FRAME, {"name": "w", "op": "buffer", "length": 5}, *TAIL)) == 5
    assert graphs.sample_shape((3, 3), layers(*FRAME, {"name": "w", "op": "buffer", "length": 5},
                                              *TAIL)) == (5, 3, 3)
    assert graphs.sample_shape((3, 3), layers(*FRAME)) == (3, 3)


@pytest.mark.parametrize("input_shape,specs,expected", [
    ((3, 5), [*FRAME, {"name": "w", "op": "buffer", "length": 4}, *TAIL],
     "input must be [C] or have spatial size 1; got [4, 3]"),
    ((3, 3), [*FRAME, {"name": "w", "op": "buffer", "length": 4},
              {"name": "v", "op": "buffer", "length": 4, "inputs": ["f"]},
              {"name": "t", "op": "conv1d", "out": 2, "kernel": 3, "inputs": ["w"]}],
     "a model has at most one buffer; 'w' is the first"),
    ((4, 3), [*FRAME, {"name": "w", "op": "buffer", "length": 3},
              {"name": "j", "op": "add", "inputs": ["w", "input"]}],
     "'j' reads 'input', computed per frame before buffer 'w', together with data after it"),
    ((3, 3), [*FRAME, {"name": "w", "op": "buffer", "length": 4},
              {"name": "g", "op": "conv1d", "out": 2, "kernel": 1, "inputs": ["f"]}],
     "the model's output 'g' must come after buffer 'w'"),
])
def test_buffer_graph_rules(input_shape, specs, expected):
    assert any(expected in message for message in problems(input_shape, specs)), \
        problems(input_shape, specs)


def test_buffer_length_is_validated():
    with pytest.raises(Exception, match="greater than or equal to 2"):
        layers({"name": "w", "op": "buffer", "length": 1})


def test_frames_cut_the_last_axis_in_time_order():
    x = np.arange(2 * 3 * 12).reshape(2, 3, 12)
    clips = framed(x, 4)
    assert clips.shape == (2, 4, 3, 3)
    assert framed_shape((3, 12), 4) == (4, 3, 3)
    np.testing.assert_array_equal(clips[1, 2, 0], x[1, 0, 6:9])
    np.testing.assert_array_equal(clips[0, 3, 2], x[0, 2, 9:12])
    with pytest.raises(DataFileError, match="cannot be cut into 5 equal frames.*divisor of 12"):
        framed_shape((3, 12), 5)


def test_torch_and_reference_gather_each_clips_frames_in_order():
    from edgebuild.ops import OPS

    spec = layers({"name": "w", "op": "buffer", "length": 3})[0]
    frames = np.arange(2 * 3 * 4).reshape(6, 4)  # 2 clips x 3 frames, 4 channels
    ref = OPS["buffer"].reference(spec, None, [frames], "half_up")
    out = OPS["buffer"].torch.forward(spec, None, [torch.as_tensor(frames)], Mode("float")).numpy()
    np.testing.assert_array_equal(ref, out)
    np.testing.assert_array_equal(ref[1, :, 0], frames[3])  # clip 1, oldest column = frame 3
    np.testing.assert_array_equal(ref[1, 2, :], frames[3:6, 2])


def test_net_runs_the_frame_layers_per_frame():
    model = layers(*FRAME, {"name": "w", "op": "buffer", "length": 4}, *TAIL)
    torch.manual_seed(0)
    net = Net((3, 3), model, Mode("float", clamp=False)).double()
    clips = torch.randn(2, 4, 3, 3, dtype=torch.float64)
    values = net.forward_all(clips)
    assert values["f"].shape == (8, 4, 1) and values["w"].shape == (2, 4, 4)
    alone = Net((3, 3), layers(*FRAME), Mode("float", clamp=False)).double()
    alone.blocks["f"].load_state_dict(net.blocks["f"].state_dict())
    one = alone.forward_all(clips[1, 2][None])["f"]  # frame 2 of clip 1 on its own
    torch.testing.assert_close(values["w"][1, :, 2], one[0, :, 0])
    assert net(clips).shape == (2, 4)  # (2 classes x 2 positions) flattened per sample


STREAM = """\
name: stream
seed: 5
dataset:
  format: ts
  train: {{package: aeon, path: datasets/data/BasicMotions/BasicMotions_TRAIN.ts}}
  test: {{package: aeon, path: datasets/data/BasicMotions/BasicMotions_TEST.ts}}
  normalize: {{method: standard, per_channel: true}}
  frames: {frames}
model:
  input: [6, {frame}]
  layers:
    - {{name: f1, op: conv1d, out: 8, kernel: 3, pad: 1, act: relu, pool: {{mode: max, size: 2}}}}
    - {{name: f2, op: conv1d, out: 12, kernel: {kernel}, act: relu}}
    - {{name: window, op: buffer, length: {length}}}
    - {{name: t1, op: conv1d, out: 12, kernel: 3, dilation: 2, act: relu}}
    - {{name: t2, op: conv1d, out: 4, kernel: {tail}, wide: true}}
train: {{epochs: 3, batch: 8}}
qat: {{epochs: 1, batch: 8}}
target: {{device: cortex-m4, memory: {{l1: 4KiB, l2: 64KiB, flash: 256KiB}}}}
"""

DRIVER = r"""
#include <stdio.h>
#include "cnn.h"
#include "stream.h"
int main(void)
{
    static stream_cnn_output_t out[STREAM_CNN_OUTPUT_SIZE];
    int t, i;
    stream_cnn_init();
    for (t = 0; t < STREAM_FRAMES; ++t) {
        stream_cnn_load_input(stream[t]);
        stream_cnn_run();
        stream_cnn_unload(out);
        for (i = 0; i < STREAM_CNN_OUTPUT_SIZE; ++i)
            printf("%ld%c", (long)out[i], i + 1 < STREAM_CNN_OUTPUT_SIZE ? ' ' : '\n');
    }
    return 0;
}
"""


def stream_project(root: Path, length: int = 5) -> Path:
    (root / "manifests").mkdir(parents=True)
    (root / "manifests" / "stream.yaml").write_text(STREAM.format(
        frames=length, frame=100 // length, kernel=100 // length // 2, length=length,
        tail=length - 4))
    return root


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler")
def test_c_keeps_the_window_across_inferences(tmp_path):
    root = stream_project(tmp_path)
    result = build_json(root)["stream"]
    assert result["kat"]["status"] == "built"
    report = json.loads((root / "build" / "stream" / "report.json").read_text())["metrics"]
    assert report["c_vs_reference"]["mismatches"] == 0 and report["c_vs_reference"]["samples"] > 0
    assert report["memory"]["state_bytes"] == 12 * 5

    from edgebuild.model import quantized
    from edgebuild.pipeline import validation

    checked = validation.load(root / "manifests" / "stream.yaml")
    model = quantized.load(root / "build" / "stream" / "quantize", checked.manifest)
    clips = np.load(root / "build" / "stream" / "data" / "data.npz")["x_test"][:3]
    stream = clips.reshape(-1, 6, 20)  # three recordings back to back, 15 frames, no reset
    work = root / "driver"
    shutil.copytree(root / "build" / "stream" / "codegen" / "model", work)
    rows = ",\n".join("{" + ", ".join(map(str, frame.ravel())) + "}" for frame in stream)
    (work / "stream.h").write_text(f"#define STREAM_FRAMES {len(stream)}\n"
                                   f"static const int8_t stream[][STREAM_CNN_INPUT_SIZE] = {{{rows}}};\n")
    (work / "driver.c").write_text(DRIVER)
    sources = sorted(str(p.name) for p in work.glob("*.c"))
    subprocess.run(["cc", "-std=c99", "-O1", "-DEB_HOST", "-I.", "-o", "driver", *sources],
                   cwd=work, check=True, capture_output=True)
    printed = subprocess.run(["./driver"], cwd=work, check=True, capture_output=True, text=True)
    outputs = np.array([[int(v) for v in line.split()] for line in printed.stdout.splitlines()])
    windows = np.stack([stream[t - 4:t + 1] for t in range(4, len(stream))])
    expected = quantized.run_reference(model, windows).reshape(len(windows), -1)
    np.testing.assert_array_equal(outputs[4:], expected)  # every window, across recordings


def test_dataset_frames_must_fit_the_model(tmp_path):
    root = stream_project(tmp_path)
    path = root / "manifests" / "stream.yaml"
    path.write_text(path.read_text().replace("frames: 5", "frames: 4"))
    result = run_cli(["check"], root)
    assert result.returncode == 2, result.stderr
    assert "need clips of 5 frames" in result.stderr.replace("needs", "need")
    path.write_text(path.read_text().replace("frames: 4", "frames: 7"))
    result = run_cli(["check"], root)
    assert result.returncode == 2 and "cannot be cut into 7 equal frames" in result.stderr
    path.write_text(path.read_text().replace("    frames: 7\n", "").replace("  frames: 7\n", ""))
    result = run_cli(["check"], root)
    assert result.returncode == 2 and "set dataset.frames: 5" in result.stderr


# --- on a MAX7800x: the buffer is a region of data memory kept across inferences ------------

def device_model(channels: int = 32, length: int = 10, **sections) -> dict:
    from devicemodels import model

    return model([{"name": "f1", "op": "conv1d", "out": 16, "kernel": 3, "pad": 1, "act": "relu"},
                  {"name": "f2", "op": "conv1d", "out": channels, "kernel": 5, "act": "relu",
                   "pool": {"mode": "max", "size": 2}},
                  {"name": "w", "op": "buffer", "length": length},
                  {"name": "t1", "op": "conv1d", "out": 16, "kernel": 3, "act": "relu"},
                  {"name": "t2", "op": "conv1d", "out": 4, "kernel": length - 2, "wide": True}],
                 input_shape=(6, 10), **sections)


def test_the_buffer_is_a_shift_layer_reading_its_producer():
    from devicemodels import hardware

    _, hw, _ = hardware(device_model())
    layer = next(h for h in hw if h.name == "w")
    assert (layer.op, layer.inputs, layer.in_shape, layer.out_shape) == \
        ("buffer", ("f2",), (32, 9), (32, 10))
    assert layer.persistent and not layer.has_weights


def test_automatic_placement_keeps_the_window_at_the_top_of_memory():
    from devicemodels import placed_ok

    placed = placed_ok(device_model())
    window, producer = placed.layer("w"), placed.layer("f2")
    assert window.out_offset == 0x8000 - 4 * 10 and window.in_offset == window.out_offset + 4
    assert producer.out_offset == window.out_offset + 4 * 9  # the newest frame: the last word
    assert producer.output_processors == window.processors == window.output_processors
    region = next(r for r in placed.data if r.tensor == "w")
    assert (region.first, region.last) == (-1, len(placed.layers))  # kept across inferences


def test_given_buffer_offsets_are_checked():
    from devicemodels import resolve

    sections = {"placement": {"w": {"out_offset": 0x7000, "in_offset": 0x7008}}}
    _, _, _, problems = resolve(device_model(**sections))
    assert any("buffer 'w': in_offset 0x7008 - 4, i.e. 0x7004 conflicts with layer 'w': "
               "out_offset 0x7000" in p.message for p in problems), problems


def test_a_buffer_over_64_channels_is_refused():
    from devicemodels import hardware

    from edgebuild.targets.max7800x import limits

    manifest, hw, profile = hardware(device_model(channels=80))
    found = [p.message for p in limits.check(hw, manifest, profile)]
    assert "layer 'w': a buffer of 80 channels needs several passes, but max78000 shifts a " \
           "buffer in one pass: at most 64 channels" in found
