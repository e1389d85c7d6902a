"""Cortex-M4 toolchain: startup file, linker script template, QEMU runs, instruction counts.

Skips (with the reason) when arm-none-eabi-gcc / newlib / qemu-system-arm are absent.
"""

from __future__ import annotations

import re
import shutil
import textwrap
from pathlib import Path

import jinja2
import pytest

from edgebuild.targets import toolchain

FLASH_BYTES = 256 * 1024
RAM_BYTES = 64 * 1024
STACK_BYTES = 8 * 1024
HEAP_BYTES = 4 * 1024
RUN_TIMEOUT_S = 30
# as the generated Makefile builds firmware (startup_m4.c is compiled with them too)
BUILD_FLAGS = ("-O2", "-std=c99", "-Wall", "-Wextra", "-Werror", "-ffunction-sections",
               "-fdata-sections", "-Wl,--gc-sections")


@pytest.fixture(scope="module")
def tools() -> toolchain.ArmTools:
    found = toolchain.arm_toolchain()
    if found is None:
        pytest.skip(f"Cortex-M4 toolchain absent: {toolchain.missing_reason()}")
    return found


@pytest.fixture(scope="module")
def link_script(tmp_path_factory) -> Path:
    template = (toolchain.templates_dir() / "project" / "link.ld.j2").read_text()
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    path = tmp_path_factory.mktemp("ld") / "link.ld"
    path.write_text(env.from_string(template).render(
        flash_bytes=FLASH_BYTES, ram_bytes=RAM_BYTES, stack_bytes=STACK_BYTES,
        heap_bytes=HEAP_BYTES))
    return path


@pytest.fixture(scope="module")
def plugin(tools, tmp_path_factory) -> Path:
    if shutil.which("gcc") is None and shutil.which("cc") is None:
        pytest.skip("no host C compiler to build the QEMU plugin")
    # a comma in the path: QEMU's option parser needs it escaped (run_qemu does that)
    return toolchain.build_plugin(tmp_path_factory.mktemp("plugin") / "with,comma")


def build(tools, link_script: Path, directory: Path, name: str, source: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    c_file = directory / f"{name}.c"
    c_file.write_text(textwrap.dedent(source))
    return toolchain.build_firmware(tools, [c_file], link_script, directory / f"{name}.elf",
                                    flags=BUILD_FLAGS)


def int8_values(n: int, mul: int, add: int) -> list[int]:
    return [((i * mul + add) % 256) - 128 for i in range(n)]


def dot_program(n: int) -> tuple[str, int]:
    """Firmware printing the dot product of two int8[n] arrays (computed between the
    markers) and a float result; returns (source, expected dot product)."""
    a, b = int8_values(n, 37, 11), int8_values(n, 101, 200)
    expected = sum(x * y for x, y in zip(a, b, strict=True))
    source = f"""
        #include <stdint.h>
        #include <stdio.h>
        #include <stdlib.h>

        #define N {n}
        static const int8_t a[N] = {{{", ".join(map(str, a))}}};
        int8_t b[N] = {{{", ".join(map(str, b))}}}; /* .data: copied by startup */
        static int32_t zeroed[16];                        /* .bss: zeroed by startup */
        volatile float fin = 1.5f;

        __attribute__((noinline)) void eb_marker_start(void) {{ __asm__ volatile(""); }}
        __attribute__((noinline)) void eb_marker_stop(void) {{ __asm__ volatile(""); }}

        int main(void)
        {{
            int32_t acc = 0;
            int i;
            eb_marker_start();
            for (i = 0; i < N; ++i) {{
                acc += (int32_t)a[i] * b[i];
            }}
            eb_marker_stop();
            {{
                const float y = fin * 2.25f + 0.5f; /* 3.875: hardware FPU */
                printf("dot=%ld float1000=%ld zero=%ld\\n", (long)acc, (long)(y * 1000.0f),
                       (long)zeroed[i % 16]);
            }}
            {{  /* the heap is the linker script's reservation: small works, too big fails */
                void *small = malloc(64), *huge = malloc({HEAP_BYTES} * 2);
                printf("heap small=%d huge=%d\\n", small != NULL, huge != NULL);
            }}
            return 3;
        }}
    """
    return source, expected


def test_templates_present():
    root = toolchain.templates_dir()
    for relative in ("project/startup_m4.c", "project/link.ld.j2", "tools/insn_count.c"):
        assert (root / relative).is_file(), relative


def test_versions_and_plugin(tools, plugin):
    assert "arm-none-eabi-gcc" in toolchain.tool_version(tools.gcc)
    assert "QEMU" in toolchain.tool_version(tools.qemu)
    assert plugin.is_file() and plugin.name == "insn_count.so"


@pytest.fixture(scope="module")
def dot_elfs(tools, link_script, tmp_path_factory) -> dict[int, tuple[Path, int]]:
    work = tmp_path_factory.mktemp("dot")
    elfs = {}
    for n in (256, 512):
        source, expected = dot_program(n)
        elfs[n] = (build(tools, link_script, work, f"dot{n}", source), expected)
    return elfs


def test_run_prints_exits_and_counts(tools, plugin, dot_elfs):
    counts = {}
    for n, (elf, expected) in dot_elfs.items():
        start = toolchain.symbol_address(tools.nm, elf, "eb_marker_start")
        stop = toolchain.symbol_address(tools.nm, elf, "eb_marker_stop")
        assert start % 2 == 0 and stop % 2 == 0 and start != stop
        runs = [toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin,
                                   start=start, stop=stop) for _ in range(2)]
        for run in runs:
            assert run.exit_code == 3, run.stderr
            assert f"dot={expected} float1000=3875 zero=0" in run.stdout
            assert "heap small=1 huge=0" in run.stdout
            assert run.instructions is not None and run.instructions > 0, run.stderr
        assert runs[0].instructions == runs[1].instructions  # exact and repeatable
        counts[n] = runs[0].instructions
    # at least a few instructions per element; doubling the loop doubles the count
    assert counts[256] > 256 * 3
    assert 1.8 < counts[512] / counts[256] < 2.2, counts


def test_run_without_plugin_and_sizes(tools, dot_elfs):
    elf, expected = dot_elfs[256]
    run = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S)
    assert run.exit_code == 3 and run.instructions is None
    assert f"dot={expected}" in run.stdout
    sizes = toolchain.elf_size(tools, elf)
    assert sizes["text"] > 256 and sizes["data"] >= 256
    assert sizes["bss"] >= STACK_BYTES + HEAP_BYTES  # the reservations are in .bss terms


def test_markers_not_reached_give_no_count(tools, plugin, dot_elfs):
    elf, _ = dot_elfs[256]
    start = toolchain.symbol_address(tools.nm, elf, "eb_marker_start")
    run = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=plugin, start=start,
                             stop=0x3FFFF0)
    assert run.exit_code == 3 and run.instructions is None
    assert "stop address never reached" in run.stderr


def test_qemu_failure_is_an_error(tools, dot_elfs, tmp_path):
    elf, _ = dot_elfs[256]
    with pytest.raises(toolchain.ToolchainError, match="Could not load plugin"):
        toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S, plugin=tmp_path / "none.so",
                           start=0x100, stop=0x200)


def test_missing_toolchain_has_a_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert toolchain.arm_toolchain() is None
    assert "arm-none-eabi-gcc" in toolchain.missing_reason()


def test_symbol_missing_is_an_error(tools, dot_elfs):
    with pytest.raises(toolchain.ToolchainError, match="eb_no_such_symbol"):
        toolchain.symbol_address(tools.nm, dot_elfs[256][0], "eb_no_such_symbol")


@pytest.mark.parametrize("region, declaration", [
    ("RAM", f"static volatile uint8_t big[{RAM_BYTES}];"),
    ("FLASH", f"static const volatile uint8_t big[{FLASH_BYTES}] = {{1}};"),
])
def test_budget_overflow_fails_at_link_time(tools, link_script, tmp_path, region,
                                             declaration):
    source = f"""
        #include <stdint.h>
        {declaration}
        int main(void) {{ return big[7]; }}
    """
    with pytest.raises(toolchain.ToolchainError) as caught:
        build(tools, link_script, tmp_path, "too_big", source)
    message = str(caught.value)
    assert f"region `{region}' overflowed" in message or f"{region} budget" in message, message
    assert not (tmp_path / "too_big.elf").exists()


FAULTS = {
    # a synchronous fault that cannot preempt (PRIMASK set) escalates to HardFault
    "hardfault": ('__asm__ volatile("cpsid i" ::: "memory");\n__builtin_trap();', 0xF3,
                  "HardFault"),
    # an undefined instruction (UDF) is a UsageFault, enabled by the startup file
    "usagefault": ("__builtin_trap();", 0xF6, "UsageFault"),
    # a float instruction with the FPU switched off again: NOCP UsageFault, which shows
    # that the compiler emits real FPU instructions and the startup's enable is needed
    "fpu_off": ('*(volatile uint32_t *)0xE000ED88u &= ~(0xFu << 20);\n'
                '__asm__ volatile("dsb\\n\\tisb" ::: "memory");\n'
                'fin = fin * 3.0f;', 0xF6, "UsageFault"),
}


@pytest.mark.parametrize("name", sorted(FAULTS))
def test_faults_exit_with_distinctive_code(tools, link_script, tmp_path, name):
    body, code, label = FAULTS[name]
    source = f"""
        #include <stdint.h>
        #include <stdio.h>
        volatile float fin = 1.5f;
        int main(void)
        {{
            printf("before the fault\\n");
{textwrap.indent(body, " " * 12)}
            return (int)fin;
        }}
    """
    elf = build(tools, link_script, tmp_path, name, source)
    run = toolchain.run_qemu(tools, elf, timeout=RUN_TIMEOUT_S)
    assert run.exit_code == code, (run.stdout, run.stderr)
    assert toolchain.FAULT_EXIT_CODES[code] == label
    assert "before the fault" in run.stdout
    assert re.search(rf"edgebuild: {label} pc=0x[0-9a-f]{{8}}", run.stderr), run.stderr


def test_hung_firmware_times_out(tools, link_script, tmp_path):
    source = """
        int main(void)
        {
            for (;;) {
                __asm__ volatile("");
            }
        }
    """
    elf = build(tools, link_script, tmp_path, "hang", source)
    with pytest.raises(toolchain.ToolchainError, match="timed out"):
        toolchain.run_qemu(tools, elf, timeout=2)
