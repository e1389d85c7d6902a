"""The optimized kernels (templates/kernels/eb_kernels_opt.c) against the reference kernels
(eb_kernels.c), bit for bit. The reference is checked against numpy in test_kernels.py; here
C is compared with C:

* host: both files in one shared library (the portable emulation of SMLAD/SXTB16 runs the
  same algorithm), random conv and linear configurations through ctypes;
* Cortex-M4 under QEMU (when arm-none-eabi-gcc and qemu-system-arm are installed): a firmware
  embedding a few configurations' inputs and the reference outputs computed on the host runs
  the DSP-intrinsic build and exits non-zero on any mismatch;
* instructions per MAC under QEMU (TCG plugin templates/tools/insn_count.c) for a conv-heavy
  layer, reference vs optimized: the optimized kernel must reach <= 1.5 and be >= 2x better.
"""

from __future__ import annotations

import ctypes
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from kernel_abi import CONV_FIELDS, I8, I16, I32, ConvParams

from edgebuild.core import numerics

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "templates" / "kernels"
PROJECT = ROOT / "templates" / "project"
PLUGIN_SRC = ROOT / "templates" / "tools" / "insn_count.c"
GCC = shutil.which("gcc")
ARM_GCC = shutil.which("arm-none-eabi-gcc")
ARM_NM = shutil.which("arm-none-eabi-nm")
QEMU = shutil.which("qemu-system-arm")
CFLAGS = ["-std=c99", "-O2", "-Wall", "-Wextra", "-Werror",
          "-DEB_NO_PREFIX"]  # the bare kernel library: plain names (eb_kernels.h)
M4_FLAGS = ["-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard", "-mfpu=fpv4-sp-d16"]
M4_LINK = ["-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs"]
LINK_VARS = {"flash_bytes": 4194304, "ram_bytes": 4194304, "stack_bytes": 8192,
             "heap_bytes": 4096}
QEMU_CMD = ["-M", "mps2-an386", "-nographic", "-semihosting-config", "enable=on,target=native"]

SEED = 20240611
CONV_CASES = 60
LINEAR_CASES = 30
M4_CASES = 10  # random conv and linear configurations in the QEMU firmware
M4_EDGE_CASES = (1, 3, 5, 8)  # and these EDGE_CONVS
GUARD = 16
SENTINEL = 0x5A
# The conv-heavy layer measured under QEMU, and the targets.
BENCH = {"in_c": 16, "in_hw": 8, "out_c": 32, "k": 3, "pad": 1}
TARGET_INSN_PER_MAC = 1.5
TARGET_SPEEDUP = 2.0

P8, P16, P32 = (ctypes.POINTER(t) for t in (I8, I16, I32))
PROBE = """#include <stddef.h>
#include "eb_kernels_opt.h"
int eb_test_conv_scratch(int ipg, int k_h, int k_w) { return EB_CONV_OPT_SCRATCH(ipg, k_h, k_w); }
int eb_test_linear_scratch(int in_f) { return EB_LINEAR_OPT_SCRATCH(in_f); }
int eb_test_sizeof_conv(void) { return (int)sizeof(eb_conv_params); }
""" + "".join(f"int eb_test_offsetof_{f}(void) {{ return (int)offsetof(eb_conv_params, {f}); }}\n"
              for f, _ in ConvParams._fields_)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    build = tmp_path_factory.mktemp("eb_kernels_opt")
    (build / "probe.c").write_text(PROBE)
    shared = build / "libeb_opt.so"
    result = subprocess.run(
        [GCC, *CFLAGS, "-shared", "-fPIC", f"-I{KERNELS}", str(KERNELS / "eb_kernels.c"),
         str(KERNELS / "eb_kernels_opt.c"), str(build / "probe.c"), "-o", str(shared)],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"gcc failed:\n{result.stderr}"
    so = ctypes.CDLL(str(shared))
    conv = [ctypes.POINTER(ConvParams), P8, P8, P32]
    lin = [ctypes.c_int, ctypes.c_int, P8, P8, P32]
    q = [ctypes.c_int] * 3
    for name, args in {"eb_conv2d": [*conv, P8], "eb_conv2d_wide": [*conv, P32],
                       "eb_conv2d_opt": [*conv, P8, P16], "eb_conv2d_wide_opt": [*conv, P32, P16],
                       "eb_linear": [*lin, *q, P8], "eb_linear_wide": [*lin, P32],
                       "eb_linear_opt": [*lin, *q, P8, P16],
                       "eb_linear_wide_opt": [*lin, P32, P16]}.items():
        getattr(so, name).argtypes = args
        getattr(so, name).restype = None
    return so


# ---- random configurations -----------------------------------------------------------------

def conv_out(size: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def int8_data(rng, shape) -> np.ndarray:
    """int8 from one of several distributions; -128 and 127 always occur."""
    flavour = rng.integers(4)
    if flavour == 0:
        x = rng.integers(-128, 128, size=shape)
    elif flavour == 1:
        x = rng.integers(-128, 16, size=shape)
    elif flavour == 2:
        x = rng.integers(-3, 4, size=shape)
    else:
        x = rng.choice([-128, 127], size=shape)
    flat = x.reshape(-1)
    flat[rng.integers(flat.size)] = -128
    flat[rng.integers(flat.size)] = 127
    return x.astype(np.int8)


def int_weights(rng, shape) -> tuple[np.ndarray, int]:
    """Weights of a random bit width; extremes present, sometimes all at the minimum (-128)."""
    bits = int(rng.choice(numerics.WEIGHT_BITS))
    low, high = numerics.weight_limits(bits)
    w = rng.choice([low, high], size=shape) if rng.random() < 0.15 else \
        rng.integers(low, high + 1, size=shape)
    flat = w.reshape(-1)
    flat[0] = low
    flat[-1] = high
    if rng.random() < 0.1:
        w = np.full(shape, low)
    return w.astype(np.int8), bits


def random_bias(rng, count: int) -> np.ndarray | None:
    if rng.random() < 0.3:
        return None
    magnitude = 1 << int(rng.choice([4, 10, 16, 22]))
    return rng.integers(-magnitude, magnitude, size=count).astype(np.int32)


def conv_config(rng, index: int) -> dict:
    while True:
        in_c = int(rng.integers(1, 21))
        layout = ["dense", "dense", "depthwise", "grouped"][index % 4]
        if layout == "dense":
            groups, out_c = 1, int(rng.integers(1, 12))
        elif layout == "depthwise":
            groups = in_c
            out_c = in_c * int(rng.choice([1, 1, 2]))
        else:
            groups = int(rng.choice([d for d in range(1, in_c + 1) if in_c % d == 0]))
            out_c = groups * int(rng.integers(1, 4))
        one_d = rng.random() < 0.15
        cfg = {
            "in_c": in_c, "in_h": 1 if one_d else int(rng.integers(1, 14)),
            "in_w": int(rng.integers(1, 14)), "out_c": out_c,
            "k_h": 1 if one_d else int(rng.integers(1, 6)), "k_w": int(rng.integers(1, 6)),
            "stride_h": 1 if one_d else int(rng.integers(1, 4)),
            "stride_w": int(rng.integers(1, 4)),
            "pad_h": 0 if one_d else int(rng.integers(0, 4)), "pad_w": int(rng.integers(0, 4)),
            "dil_h": 1 if one_d else int(rng.integers(1, 3)), "dil_w": int(rng.integers(1, 3)),
            "groups": groups, "shift": int(rng.integers(-15, 4)),
            "rounding": int(rng.integers(2)), "act": int(rng.integers(3))}
        cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"],
                                cfg["dil_h"])
        cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"],
                                cfg["dil_w"])
        if cfg["out_h"] >= 1 and cfg["out_w"] >= 1:
            return cfg


def conv_case(kind: str, index: int) -> tuple[dict, np.ndarray, np.ndarray, np.ndarray | None]:
    rng = np.random.default_rng([SEED, sum(map(ord, kind)), index])
    cfg = conv_config(rng, index)
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    return cfg, x, w, random_bias(rng, cfg["out_c"])


def linear_case(kind: str, index: int):
    rng = np.random.default_rng([SEED, sum(map(ord, kind)), index])
    in_f = int(rng.choice([1, 2, 3, 4, 5, 7, 8, 9])) if index < 8 else int(rng.integers(1, 400))
    out_f = int(rng.integers(1, 24))
    x = int8_data(rng, (in_f,))
    w, _ = int_weights(rng, (out_f, in_f))
    q = {"shift": int(rng.integers(-15, 4)), "rounding": int(rng.integers(2)),
         "act": int(rng.integers(3))}
    return in_f, out_f, x, w, random_bias(rng, out_f), q


# ---- calling the kernels -------------------------------------------------------------------

def ptr(arr, ctype):
    return None if arr is None else arr.ctypes.data_as(ctypes.POINTER(ctype))


def guarded(count: int, dtype) -> np.ndarray:
    return np.full(count + GUARD, SENTINEL, dtype=dtype)


def checked(buf: np.ndarray, count: int, what: str) -> np.ndarray:
    assert (buf[count:] == SENTINEL).all(), f"{what} wrote past its output"
    return buf[:count].copy()


def scratch_buffer(elements: int) -> np.ndarray:
    buf = np.full(elements + GUARD, 0x5A5A, dtype=np.int16)
    assert buf.ctypes.data % 4 == 0
    return buf


def check_scratch(buf: np.ndarray, elements: int, what: str) -> None:
    assert (buf[elements:] == 0x5A5A).all(), f"{what} wrote past EB_*_OPT_SCRATCH"


def params_of(cfg: dict) -> ConvParams:
    return ConvParams(**{k: cfg[k] for k in (*CONV_FIELDS, "shift", "rounding", "act")})


def run_conv_pair(lib, cfg, x, w, bias, wide: bool) -> tuple[np.ndarray, np.ndarray]:
    """(reference, optimized) outputs of eb_conv2d(_wide) and eb_conv2d(_wide)_opt."""
    params = params_of(cfg)
    x, w = np.ascontiguousarray(x), np.ascontiguousarray(w)
    count = cfg["out_c"] * cfg["out_h"] * cfg["out_w"]
    elements = lib.eb_test_conv_scratch(cfg["in_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"])
    scratch = scratch_buffer(elements)
    dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
    ref, opt = guarded(count, dtype), guarded(count, dtype)
    name = "eb_conv2d_wide" if wide else "eb_conv2d"
    getattr(lib, name)(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(bias, I32),
                       ptr(ref, ctype))
    getattr(lib, name + "_opt")(ctypes.byref(params), ptr(x, I8), ptr(w, I8), ptr(bias, I32),
                                ptr(opt, ctype), ptr(scratch, I16))
    check_scratch(scratch, elements, name + "_opt")
    return checked(ref, count, name), checked(opt, count, name + "_opt")


def run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide: bool):
    elements = lib.eb_test_linear_scratch(in_f)
    scratch = scratch_buffer(elements)
    dtype, ctype = (np.int32, I32) if wide else (np.int8, I8)
    ref, opt = guarded(out_f, dtype), guarded(out_f, dtype)
    args = [in_f, out_f, ptr(x, I8), ptr(w, I8), ptr(bias, I32)]
    if wide:
        lib.eb_linear_wide(*args, ptr(ref, I32))
        lib.eb_linear_wide_opt(*args, ptr(opt, I32), ptr(scratch, I16))
    else:
        qa = [q["shift"], q["rounding"], q["act"]]
        lib.eb_linear(*args, *qa, ptr(ref, I8))
        lib.eb_linear_opt(*args, *qa, ptr(opt, I8), ptr(scratch, I16))
    check_scratch(scratch, elements, "eb_linear_opt")
    return checked(ref, out_f, "eb_linear"), checked(opt, out_f, "eb_linear_opt")


# ---- host: optimized == reference -----------------------------------------------------------

def test_struct_layout_matches_header(lib):
    assert ctypes.sizeof(ConvParams) == lib.eb_test_sizeof_conv()
    for field, _ in ConvParams._fields_:
        assert getattr(ConvParams, field).offset == getattr(lib, f"eb_test_offsetof_{field}")()


def test_scratch_macros(lib):
    """Documented sizes: conv 4 columns of round4(K) int16, linear one column."""
    for ipg, kh, kw in [(1, 1, 1), (1, 3, 3), (16, 3, 3), (3, 5, 1), (7, 1, 1)]:
        kp = (ipg * kh * kw + 3) // 4 * 4
        assert lib.eb_test_conv_scratch(ipg, kh, kw) == 4 * kp
    for in_f in (1, 4, 5, 255, 256):
        assert lib.eb_test_linear_scratch(in_f) == (in_f + 3) // 4 * 4


@pytest.mark.parametrize("index", range(CONV_CASES))
def test_conv_opt_equals_reference(lib, index):
    cfg, x, w, bias = conv_case("conv", index)
    context = f"{cfg} bias={'yes' if bias is not None else 'NULL'}"
    ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide=True)
    assert np.abs(ref.astype(np.int64)).max() < (1 << 30), context
    np.testing.assert_array_equal(opt, ref, err_msg="wide " + context)
    ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide=False)
    np.testing.assert_array_equal(opt, ref, err_msg=context)


@pytest.mark.parametrize("index", range(LINEAR_CASES))
def test_linear_opt_equals_reference(lib, index):
    in_f, out_f, x, w, bias, q = linear_case("linear", index)
    context = f"in_f={in_f} out_f={out_f} {q} bias={'yes' if bias is not None else 'NULL'}"
    for wide in (True, False):
        ref, opt = run_linear_pair(lib, in_f, out_f, x, w, bias, q, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {context}")


# Hand-picked shapes for the kernel's special paths: rows narrower than a word, padding
# wider than a word (taps entirely outside), whole output rows in the padding, K % 4 = 1..3,
# 4-pixel groups that wrap to the next output row, stride 2, 1x1, k wider than the input.
EDGE_CONVS = [
    dict(in_c=2, in_h=3, in_w=1, out_c=3, k_h=3, k_w=1, pad_h=1, pad_w=0),
    dict(in_c=3, in_h=4, in_w=2, out_c=2, k_h=2, k_w=3, pad_h=1, pad_w=2),
    dict(in_c=1, in_h=5, in_w=3, out_c=5, k_h=3, k_w=3, pad_h=1, pad_w=1),
    dict(in_c=4, in_h=6, in_w=9, out_c=9, k_h=3, k_w=3, pad_h=5, pad_w=6),
    dict(in_c=5, in_h=7, in_w=7, out_c=11, k_h=3, k_w=3, pad_h=1, pad_w=1),
    dict(in_c=3, in_h=9, in_w=13, out_c=4, k_h=5, k_w=5, pad_h=4, pad_w=4, dil_h=2, dil_w=2),
    dict(in_c=6, in_h=8, in_w=10, out_c=6, k_h=3, k_w=3, pad_h=1, pad_w=1, stride_w=2),
    dict(in_c=7, in_h=5, in_w=6, out_c=13, k_h=1, k_w=1),
    dict(in_c=2, in_h=4, in_w=4, out_c=3, k_h=3, k_w=7, pad_h=1, pad_w=4),
    dict(in_c=8, in_h=6, in_w=6, out_c=8, k_h=3, k_w=3, pad_h=1, pad_w=1, groups=8),
    dict(in_c=1, in_h=1, in_w=17, out_c=7, k_h=1, k_w=5, pad_w=2),
    dict(in_c=33, in_h=5, in_w=8, out_c=3, k_h=1, k_w=1, stride_h=2),
]


def edge_case(index: int):
    rng = np.random.default_rng([SEED, 99, index])
    cfg = {"stride_h": 1, "stride_w": 1, "pad_h": 0, "pad_w": 0, "dil_h": 1, "dil_w": 1,
           "groups": 1, "shift": -7, "rounding": index % 2, "act": index % 3, **EDGE_CONVS[index]}
    cfg["out_h"] = conv_out(cfg["in_h"], cfg["k_h"], cfg["stride_h"], cfg["pad_h"], cfg["dil_h"])
    cfg["out_w"] = conv_out(cfg["in_w"], cfg["k_w"], cfg["stride_w"], cfg["pad_w"], cfg["dil_w"])
    assert cfg["out_h"] >= 1 and cfg["out_w"] >= 1
    x = int8_data(rng, (cfg["in_c"], cfg["in_h"], cfg["in_w"]))
    w, _ = int_weights(rng, (cfg["out_c"], cfg["in_c"] // cfg["groups"], cfg["k_h"],
                             cfg["k_w"]))
    return cfg, x, w, random_bias(rng, cfg["out_c"])


@pytest.mark.parametrize("index", range(len(EDGE_CONVS)))
def test_conv_opt_edge_shapes(lib, index):
    cfg, x, w, bias = edge_case(index)
    for wide in (True, False):
        ref, opt = run_conv_pair(lib, cfg, x, w, bias, wide)
        np.testing.assert_array_equal(opt, ref, err_msg=f"wide={wide} {cfg}")


def test_unaligned_weights_and_inputs(lib):
    """Weights and inputs at odd addresses (generated arrays are only byte-aligned)."""
    rng = np.random.default_rng([SEED, 7])
    cfg = {"in_c": 5, "in_h": 7, "in_w": 6, "out_c": 7, "k_h": 3, "k_w": 3, "stride_h": 1,
           "stride_w": 1, "pad_h": 1, "pad_w": 1, "dil_h": 1, "dil_w": 1, "groups": 1,
           "shift": -9, "rounding": 0, "act": 2, "out_h": 7, "out_w": 6}
    for offset in (1, 2, 3):
        xb = np.zeros(5 * 7 * 6 + offset, dtype=np.int8)
        wb = np.zeros(7 * 5 * 9 + offset, dtype=np.int8)
        x, w = xb[offset:], wb[offset:]
        x[:] = int8_data(rng, x.shape)
        w[:] = int_weights(rng, w.shape)[0]
        for wide in (True, False):
            ref, opt = run_conv_pair(lib, cfg, x.reshape(5, 7, 6), w.reshape(7, 5, 3, 3),
                                     None, wide)
            np.testing.assert_array_equal(opt, ref)
        q = {"shift": -8, "rounding": 1, "act": 1}
        for wide in (True, False):
            ref, opt = run_linear_pair(lib, 37, 5, x[:37], w[:185], None, q, wide)
            np.testing.assert_array_equal(opt, ref)


# ---- Cortex-M4 under QEMU ------------------------------------------------------------------

needs_m4 = pytest.mark.skipif(
    ARM_GCC is None or QEMU is None or ARM_NM is None,
    reason="arm-none-eabi-gcc / arm-none-eabi-nm / qemu-system-arm not installed "
           "(apt-get install gcc-arm-none-eabi libnewlib-arm-none-eabi qemu-system-arm)")


def c_array(ctype: str, name: str, values) -> str:
    flat = np.asarray(values).reshape(-1).astype(np.int64)
    body = ",".join(str(int(v)) for v in flat) if flat.size else "0"
    return f"static const {ctype} {name}[{max(flat.size, 1)}] = {{{body}}};\n"


@pytest.fixture(scope="module")
def m4_build(tmp_path_factory):
    """A directory with startup_m4.c and the rendered link.ld (both another helper's files)."""
    jinja2 = pytest.importorskip("jinja2")
    build = tmp_path_factory.mktemp("eb_opt_m4")
    startup, template = PROJECT / "startup_m4.c", PROJECT / "link.ld.j2"
    assert startup.is_file(), f"{startup} is missing"
    assert template.is_file(), f"{template} is missing"
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    (build / "link.ld").write_text(env.from_string(template.read_text()).render(**LINK_VARS))
    shutil.copy(startup, build / "startup_m4.c")
    return build


def build_m4(build: Path, name: str, source: str) -> Path:
    (build / f"{name}.c").write_text(source)
    elf = build / f"{name}.elf"
    result = subprocess.run(
        [ARM_GCC, *M4_FLAGS, *CFLAGS, f"-I{KERNELS}", *M4_LINK, "-Wl,-T," + str(build / "link.ld"),
         "-o", str(elf), str(build / "startup_m4.c"), str(build / f"{name}.c"),
         str(KERNELS / "eb_kernels.c"), str(KERNELS / "eb_kernels_opt.c")],
        capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, f"arm-none-eabi-gcc failed:\n{result.stderr}"
    return elf


def run_qemu(elf: Path, extra: list[str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["timeout", "60", QEMU, *QEMU_CMD, *(extra or []), "-kernel", str(elf)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=90)


M4_MAIN = """
static int16_t scratch[SCRATCH + 16] __attribute__((aligned(4)));
static int8_t out8[OUT + 16];
static int32_t out32[OUT + 16];

static void fill(int n)
{
    int i;
    for (i = 0; i < SCRATCH + 16; ++i) scratch[i] = 0x5A5A;
    for (i = 0; i < n + 16; ++i) { out8[i] = 0x5A; out32[i] = 0x5A5A5A5A; }
}

static int check(int c, const char *what, int n, int scratch_n, const int8_t *e8, const int32_t *e32)
{
    int i, bad = 0;
    for (i = 0; i < n; ++i) bad |= e8 ? out8[i] != e8[i] : out32[i] != e32[i];
    for (i = n; i < n + 16; ++i) bad |= out8[i] != 0x5A || out32[i] != 0x5A5A5A5A;
    for (i = scratch_n; i < SCRATCH + 16; ++i) bad |= scratch[i] != 0x5A5A;
    if (bad) printf("case %d %s: MISMATCH\\n", c, what);
    return bad;
}
"""


def m4_test_program(lib) -> str:
    """Reference outputs from the host library, embedded next to the inputs."""
    parts = ['#include <stdio.h>\n#include "eb_kernels.h"\n#include "eb_kernels_opt.h"\n']
    calls, max_scratch, max_out = [], 16, 16
    convs = [conv_case("m4", i) for i in range(M4_CASES)] + [edge_case(i) for i in M4_EDGE_CASES]
    for i, (cfg, x, w, bias) in enumerate(convs):
        ref8, _ = run_conv_pair(lib, cfg, x, w, bias, wide=False)
        ref32, _ = run_conv_pair(lib, cfg, x, w, bias, wide=True)
        n = ref8.size
        sn = lib.eb_test_conv_scratch(cfg["in_c"] // cfg["groups"], cfg["k_h"], cfg["k_w"])
        max_scratch, max_out = max(max_scratch, sn), max(max_out, n)
        fields = ", ".join(str(cfg[k]) for k in (*CONV_FIELDS, "shift", "rounding", "act"))
        parts.append(f"static const eb_conv_params p{i} = {{{fields}}};\n")
        parts += [c_array("int8_t", f"x{i}", x), c_array("int8_t", f"w{i}", w),
                  c_array("int8_t", f"e8_{i}", ref8), c_array("int32_t", f"e32_{i}", ref32)]
        b = "NULL"
        if bias is not None:
            parts.append(c_array("int32_t", f"b{i}", bias))
            b = f"b{i}"
        calls.append(f"fill({n}); eb_conv2d_opt(&p{i}, x{i}, w{i}, {b}, out8, scratch);\n"
                     f"bad += check({i}, \"conv\", {n}, {sn}, e8_{i}, NULL);\n"
                     f"fill({n}); eb_conv2d_wide_opt(&p{i}, x{i}, w{i}, {b}, out32, scratch);\n"
                     f"bad += check({i}, \"conv wide\", {n}, {sn}, NULL, e32_{i});\n")
        in_f, out_f, lx, lw, lb, q = linear_case("m4", i)
        lref8, _ = run_linear_pair(lib, in_f, out_f, lx, lw, lb, q, wide=False)
        lref32, _ = run_linear_pair(lib, in_f, out_f, lx, lw, lb, q, wide=True)
        sn = lib.eb_test_linear_scratch(in_f)
        max_scratch, max_out = max(max_scratch, sn), max(max_out, out_f)
        parts += [c_array("int8_t", f"lx{i}", lx), c_array("int8_t", f"lw{i}", lw),
                  c_array("int8_t", f"le8_{i}", lref8), c_array("int32_t", f"le32_{i}", lref32)]
        b = "NULL"
        if lb is not None:
            parts.append(c_array("int32_t", f"lb{i}", lb))
            b = f"lb{i}"
        args = f"{in_f}, {out_f}, lx{i}, lw{i}, {b}"
        calls.append(
            f"fill({out_f}); eb_linear_opt({args}, {q['shift']}, {q['rounding']}, {q['act']}, "
            f"out8, scratch);\nbad += check({i}, \"linear\", {out_f}, {sn}, le8_{i}, NULL);\n"
            f"fill({out_f}); eb_linear_wide_opt({args}, out32, scratch);\n"
            f"bad += check({i}, \"linear wide\", {out_f}, {sn}, NULL, le32_{i});\n")
    parts.append(f"#define SCRATCH {max_scratch}\n#define OUT {max_out}\n" + M4_MAIN)
    parts.append("int main(void)\n{\n    int bad = 0;\n" + "".join(calls) +
                 '    printf("eb_kernels_opt on M4: %d mismatching calls\\n", bad);\n'
                 "    return bad != 0;\n}\n")
    return "".join(parts)


@needs_m4
def test_m4_opt_equals_reference_under_qemu(lib, m4_build):
    elf = build_m4(m4_build, "opt_kat", m4_test_program(lib))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    assert "0 mismatching calls" in result.stdout


BENCH_MAIN = """
#include <stdio.h>
#include <string.h>
#include "eb_kernels.h"
#include "eb_kernels_opt.h"

#define IN_C {in_c}
#define IN_HW {in_hw}
#define OUT_C {out_c}
#define OUT_HW {out_hw}
#define K {k}
#define N_OUT (OUT_C * OUT_HW * OUT_HW)

static const eb_conv_params layer = {{IN_C, IN_HW, IN_HW, OUT_C, OUT_HW, OUT_HW, K, K, 1, 1, {pad},
                                     {pad}, 1, 1, 1, -9, EB_ROUND_HALF_UP, EB_ACT_RELU}};
static int8_t input[IN_C * IN_HW * IN_HW];
static int8_t weight[OUT_C * IN_C * K * K];
static int32_t bias[OUT_C];
static int8_t out_ref[N_OUT], out_opt[N_OUT];
static int16_t scratch[EB_CONV_OPT_SCRATCH(IN_C, K, K)] __attribute__((aligned(4)));

/* Markers for the instruction counter: distinct bodies (no identical-code folding). */
volatile int eb_bench_marker;
__attribute__((noinline)) void eb_bench_ref_begin(void) {{ eb_bench_marker = 1; }}
__attribute__((noinline)) void eb_bench_ref_end(void) {{ eb_bench_marker = 2; }}
__attribute__((noinline)) void eb_bench_opt_begin(void) {{ eb_bench_marker = 3; }}
__attribute__((noinline)) void eb_bench_opt_end(void) {{ eb_bench_marker = 4; }}

int main(void)
{{
    uint32_t s = 12345u;
    int i;
    for (i = 0; i < (int)sizeof input; ++i) {{ s = s * 1103515245u + 12345u; input[i] = (int8_t)(s >> 16); }}
    for (i = 0; i < (int)sizeof weight; ++i) {{ s = s * 1103515245u + 12345u; weight[i] = (int8_t)(s >> 16); }}
    for (i = 0; i < OUT_C; ++i) {{ s = s * 1103515245u + 12345u; bias[i] = (int32_t)(s >> 16) - 32768; }}
    eb_bench_ref_begin();
    eb_conv2d(&layer, input, weight, bias, out_ref);
    eb_bench_ref_end();
    eb_bench_opt_begin();
    eb_conv2d_opt(&layer, input, weight, bias, out_opt, scratch);
    eb_bench_opt_end();
    i = memcmp(out_ref, out_opt, sizeof out_ref) != 0;
    printf("bench layer: optimized %s reference\\n", i ? "DIFFERS FROM" : "equals");
    return i;
}}
"""


def symbol_addresses(elf: Path) -> dict[str, int]:
    out = subprocess.run([ARM_NM, str(elf)], capture_output=True, text=True, check=True).stdout
    table = {}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) == 3:
            table[fields[2]] = int(fields[0], 16) & ~1  # clear the Thumb bit
    return table


def count_with_plugin(build: Path, elf: Path, start: int, stop: int) -> int | None:
    """Instructions from start to stop via the TCG plugin; None if the plugin is unusable."""
    if not PLUGIN_SRC.is_file():
        return None
    plugin = build / "insn_count.so"
    if not plugin.exists():
        made = subprocess.run([GCC, "-shared", "-fPIC", "-O2", "-o", str(plugin),
                               str(PLUGIN_SRC)], capture_output=True, text=True, timeout=60)
        if made.returncode != 0:
            return None
    out = build / f"count_{start:x}_{stop:x}.txt"
    result = run_qemu(elf, ["-plugin", f"{plugin},start={start:#x},stop={stop:#x},out={out}"])
    if result.returncode != 0 or not out.is_file():
        return None
    return int(out.read_text().strip())


def count_with_exec_log(elf: Path, marks: dict[str, tuple[int, int]]) -> dict[str, int]:
    """Fallback: QEMU logs one "Trace" line per executed instruction with -singlestep -d
    exec,nochain; the log is streamed through a pipe (it is ~0.5 GB) and counted per kind."""
    cmd = ["timeout", "120", QEMU, *QEMU_CMD, "-singlestep", "-d", "exec,nochain", "-D",
           "/dev/stdout", "-kernel", str(elf)]
    trace = re.compile(r"Trace [^\[]*\[[0-9a-f]+/([0-9a-f]+)/")
    starts = {start: kind for kind, (start, _) in marks.items()}
    counts: dict[str, int] = {}
    active: str | None = None
    n = 0
    with subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True,
                          bufsize=1 << 20) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            m = trace.match(line)
            if m is None:
                continue
            pc = int(m.group(1), 16)
            if active is None:
                if pc in starts and starts[pc] not in counts:
                    active, n = starts[pc], 0
            elif pc == marks[active][1]:
                counts[active], active = n, None
            n += 1
    assert proc.returncode == 0, f"qemu exit {proc.returncode}"
    return counts


@needs_m4
def test_m4_insn_per_mac(m4_build):
    b = BENCH
    out_hw = conv_out(b["in_hw"], b["k"], 1, b["pad"], 1)
    elf = build_m4(m4_build, "bench", BENCH_MAIN.format(**b, out_hw=out_hw))
    result = run_qemu(elf)
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}{result.stderr}"
    sym = symbol_addresses(elf)
    marks = {kind: (sym[f"eb_bench_{kind}_begin"], sym[f"eb_bench_{kind}_end"])
             for kind in ("ref", "opt")}
    counts = {kind: count_with_plugin(m4_build, elf, *marks[kind]) for kind in marks}
    how = "TCG plugin templates/tools/insn_count.c"
    if None in counts.values():
        how = "-d exec,nochain log: the insn_count plugin did not build or run"
        counts = count_with_exec_log(elf, marks)
    macs = b["out_c"] * out_hw * out_hw * b["in_c"] * b["k"] * b["k"]  # incl. padding taps
    ref, opt = counts["ref"] / macs, counts["opt"] / macs
    print(f"\nconv in {b['in_c']}x{b['in_hw']}x{b['in_hw']} -> out {b['out_c']}x{out_hw}x{out_hw},"
          f" {b['k']}x{b['k']} pad {b['pad']} stride 1, {macs} MACs ({how}):\n"
          f"  eb_conv2d     {counts['ref']:9d} instructions = {ref:.3f}/MAC\n"
          f"  eb_conv2d_opt {counts['opt']:9d} instructions = {opt:.3f}/MAC ({ref / opt:.1f}x)")
    assert opt <= TARGET_INSN_PER_MAC, f"{opt:.3f} instructions per MAC"
    assert ref / opt >= TARGET_SPEEDUP
