"""Cortex-M4 toolchain helpers: arm-none-eabi-gcc builds, QEMU runs, instruction counts.

Used by the `kat` stage. Standard library only, no work at import time; every tool runs
with a timeout and stdin from /dev/null, and every failure raises ToolchainError carrying
the tool's own message.

Facts and QEMU quirks (QEMU 7.2 from Debian 12, arm-none-eabi-gcc 12.2, newlib 4.3):
- `-M mps2-an386` is a Cortex-M4 with 4 MiB at 0x0 (our "flash") and 4 MiB at 0x20000000
  (RAM). QEMU takes the initial SP and PC from the vector table at address 0 and ignores
  the ELF entry point, so newlib's crt0 and default linker script lock up: firmware links
  templates/project/startup_m4.c and link.ld (from link.ld.j2) with -nostartfiles.
- -nostartfiles also drops rdimon's crt0, which opens the semihosting stdio handles and
  fills librdimon's `__heap_limit` variable: startup_m4.c does both itself. `__heap_limit`
  is a *variable* (`_sbrk` reads its contents), so the linker script must not define a
  symbol with that name (that would move it onto unrelated memory).
- GCC turns the .data copy / .bss zero loops of a startup file into memcpy/memset calls at
  -O2; startup_m4.c writes through volatile pointers to keep them plain loops.
- The exit status of qemu-system-arm is the firmware's exit() status (newlib uses
  SYS_EXIT_EXTENDED, which QEMU 7.2 supports). The fault handlers exit with 0xF0 + the
  exception number (0xF3 HardFault, 0xF4 MemManage, 0xF5 BusFault, 0xF6 UsageFault) and
  print `edgebuild: <fault> pc=... cfsr=... hfsr=...` on stderr (semihosting SYS_WRITE0
  goes to QEMU's stderr). MemManage/BusFault/UsageFault are enabled in SHCSR, so a
  fault only escalates to HardFault when it cannot preempt (e.g. with PRIMASK set).
  Observed: a load from 0x30000000 is a BusFault, a load from 0x10000000 does not fault:
  do not rely on "unmapped" addresses to fault.
- printf reaches QEMU's stdout, stderr its stderr. newlib-nano printf has no %lld / %f
  (print `(long)` casts with %ld; %f needs -u _printf_float).
- The instruction-count plugin (templates/tools/insn_count.c) declares the plugin API v1
  itself because Debian ships no qemu-plugin.h. Plugin arguments are QemuOpts, so a comma
  in a path must be doubled (run_qemu does it). A plugin that cannot load makes QEMU print
  `qemu-system-arm: ...` and exit 1, which run_qemu reports as a ToolchainError.
- Counts are exact and repeatable: every executed instruction bumps an inline counter and
  the firmware has no interrupts, so the same ELF gives the same count on every run.
- Cycles are an estimate, not a measurement (QEMU has no timing model): the plugin decodes
  each instruction once and applies the Cortex-M4 TRM's cycle table (pipelined loads, the
  address-generation stall, taken-branch refills as P = 2, divides as 7, IT folding, the FPU);
  it assumes zero wait states, no bus contention and aligned accesses. insn_count.c holds the
  table and every assumption; tests/test_cycles.py checks hand-counted sequences.
- Per-layer figures: with `layer`, the plugin also splits the count at every execution of
  that function (the KAT firmware's `eb_marker_layer`, called before each layer and after
  the last one) and leaves the marker itself (its body and the BL to it) out of every count,
  so the segments add up to the total exactly.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from edgebuild.core.errors import StageFailed
from edgebuild.core.resources import templates_dir

QEMU_MACHINE = "mps2-an386"
# Code generation for the Cortex-M4 with its single-precision FPU (hard-float ABI).
M4_CFLAGS: tuple[str, ...] = ("-mcpu=cortex-m4", "-mthumb", "-mfloat-abi=hard",
                              "-mfpu=fpv4-sp-d16")
# Link: our startup file and linker script, newlib-nano, semihosting (stdio, exit status).
M4_LDFLAGS: tuple[str, ...] = ("-nostartfiles", "--specs=nano.specs", "--specs=rdimon.specs")
# startup_m4.c: exit status of a fault handler is FAULT_EXIT_BASE + exception number.
FAULT_EXIT_BASE = 0xF0
FAULT_EXIT_CODES = {0xF2: "NMI", 0xF3: "HardFault", 0xF4: "MemManage", 0xF5: "BusFault",
                    0xF6: "UsageFault", 0xFF: "unexpected exception"}

TOOL_TIMEOUT_S = 120
VERSION_TIMEOUT_S = 20
PLUGIN_SOURCE = "tools/insn_count.c"
PLUGIN_NAME = "insn_count.so"


class ToolchainError(StageFailed):
    """A tool was missing, failed, or timed out; the message carries its output."""


@dataclass(frozen=True)
class ArmTools:
    gcc: Path
    size: Path
    nm: Path
    qemu: Path


@dataclass(frozen=True)
class Counts:
    """Instructions executed and their estimated Cortex-M4 cycles (the plugin's model)."""

    instructions: int
    cycles: int


@dataclass(frozen=True)
class QemuRun:
    exit_code: int
    stdout: str
    stderr: str
    instructions: int | None  # between the markers; None without a plugin or markers not hit
    cycles: int | None = None  # estimated, same stretch
    # with a layer marker: start -> first mark, mark -> mark, ..., last mark -> stop
    segments: tuple[Counts, ...] = ()


def _tool_output(completed: subprocess.CompletedProcess[str]) -> str:
    return ((completed.stdout or "") + (completed.stderr or "")).strip()


def _run(command: Sequence[str | Path], what: str, timeout: float, cwd: Path | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        completed = subprocess.run([str(part) for part in command], cwd=cwd,
                                   capture_output=True, text=True, errors="replace",
                                   timeout=timeout, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise ToolchainError(f"{what}: `{command[0]}` not found ({exc})") from None
    except OSError as exc:
        raise ToolchainError(f"{what}: cannot run `{command[0]}` ({exc})") from None
    except subprocess.TimeoutExpired as exc:
        partial = _decode(exc.stdout) + _decode(exc.stderr)
        raise ToolchainError(f"{what}: timed out after {timeout:g} s"
                             + (f":\n{partial.strip()[-3000:]}" if partial.strip() else "")
                             ) from None
    if check and completed.returncode != 0:
        raise ToolchainError(f"{what} failed (exit {completed.returncode}):\n"
                             f"{_tool_output(completed)[-4000:]}")
    return completed


def _decode(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", "replace")


def _find_arm_tools() -> tuple[ArmTools | None, str]:
    names = {"gcc": "arm-none-eabi-gcc", "size": "arm-none-eabi-size",
             "nm": "arm-none-eabi-nm", "qemu": "qemu-system-arm"}
    found = {key: shutil.which(name) for key, name in names.items()}
    missing = [names[key] for key, path in found.items() if path is None]
    if missing:
        return None, (f"not on PATH: {', '.join(missing)} (Debian: apt-get install -y "
                      "--no-install-recommends gcc-arm-none-eabi libnewlib-arm-none-eabi "
                      "qemu-system-arm)")
    tools = ArmTools(**{key: Path(path) for key, path in found.items() if path is not None})
    try:
        specs = _run([tools.gcc, *M4_CFLAGS, "-print-file-name=rdimon.specs"],
                     "arm-none-eabi-gcc", VERSION_TIMEOUT_S).stdout.strip()
    except ToolchainError as exc:
        return None, str(exc)
    if not os.path.isabs(specs):
        return None, ("arm-none-eabi-gcc has no newlib (rdimon.specs not found; Debian: "
                      "apt-get install -y --no-install-recommends libnewlib-arm-none-eabi)")
    return tools, ""


def arm_toolchain() -> ArmTools | None:
    """The Cortex-M4 tools, or None when any is missing (see missing_reason())."""
    return _find_arm_tools()[0]


def missing_reason() -> str:
    """Why arm_toolchain() is None ('' when the toolchain is complete)."""
    return _find_arm_tools()[1]


def tool_version(path: Path | str) -> str:
    """The first line of `path --version`."""
    output = _tool_output(_run([path, "--version"], f"{path} --version", VERSION_TIMEOUT_S))
    return output.splitlines()[0] if output else ""


def host_cc() -> str:
    for name in ("gcc", "cc"):
        found = shutil.which(name)
        if found:
            return found
    raise ToolchainError("no host C compiler (gcc or cc) on PATH to build the QEMU plugin "
                         "(Debian: apt-get install -y gcc)")


def build_plugin(workdir: Path) -> Path:
    """Compile the instruction-count TCG plugin into workdir; returns the .so path."""
    source = templates_dir() / PLUGIN_SOURCE
    if not source.is_file():
        raise ToolchainError(f"QEMU plugin source not found: {source}")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    output = workdir / PLUGIN_NAME
    _run([host_cc(), "-shared", "-fPIC", "-O2", "-o", output, source],
         "building the QEMU instruction-count plugin", TOOL_TIMEOUT_S)
    return output


def symbol_address(nm: Path | str, elf: Path | str, name: str) -> int:
    """A symbol's address from `nm`; bit 0 (the Thumb bit) cleared for code symbols."""
    output = _run([nm, elf], f"nm {elf}", TOOL_TIMEOUT_S).stdout
    for line in output.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2] == name:
            address = int(parts[0], 16)
            return address & ~1 if parts[1] in "TtWw" else address
    raise ToolchainError(f"symbol `{name}` not found in {elf} (nm lists "
                         f"{len(output.splitlines())} symbols)")


def _qemu_opt(value: Path | str) -> str:
    """A QemuOpts value: commas are doubled."""
    return str(value).replace(",", ",,")


def _qemu_failed(tools: ArmTools, exit_code: int, stderr: str) -> bool:
    """QEMU itself failed (as opposed to the firmware exiting non-zero)."""
    if exit_code < 0:
        return True
    prefix = f"{tools.qemu.name}:"
    return exit_code != 0 and any(
        line.startswith(prefix) and "warning:" not in line for line in stderr.splitlines())


def run_qemu(tools: ArmTools, elf: Path | str, timeout: float = 60,
             plugin: Path | str | None = None, start: int | None = None,
             stop: int | None = None, layer: int | None = None) -> QemuRun:
    """Run firmware on the Cortex-M4 board with semihosting; with `plugin`, count the
    instructions (and estimate their cycles) from the first execution of `start` up to (not
    including) `stop`, split at every execution of `layer` when given."""
    command = [str(tools.qemu), "-M", QEMU_MACHINE, "-nographic",
               "-semihosting-config", "enable=on,target=native", "-kernel", str(elf)]
    if plugin is not None and (start is None or stop is None):
        raise ValueError("run_qemu: a plugin run needs both start and stop addresses")
    with tempfile.TemporaryDirectory(prefix="edgebuild-qemu-") as temp:
        count_file = Path(temp) / "instructions.txt"
        if plugin is not None:
            command += ["-plugin", f"file={_qemu_opt(Path(plugin).resolve())},"
                                   f"start={start:#x},stop={stop:#x},"
                                   f"out={_qemu_opt(count_file)}"
                                   + ("" if layer is None else f",layer={layer:#x}")]
        completed = _run(command, f"QEMU ({QEMU_MACHINE}) running {elf}", timeout, check=False)
        if _qemu_failed(tools, completed.returncode, completed.stderr):
            raise ToolchainError(f"QEMU failed (exit {completed.returncode}) running {elf}:\n"
                                 f"{_tool_output(completed)[-4000:]}")
        counted: list[Counts] = []
        if plugin is not None and count_file.is_file():
            counted = _read_counts(count_file.read_text())
    total = counted[0] if counted else None
    return QemuRun(exit_code=completed.returncode, stdout=completed.stdout,
                   stderr=completed.stderr,
                   instructions=None if total is None else total.instructions,
                   cycles=None if total is None else total.cycles, segments=tuple(counted[1:]))


def _read_counts(text: str) -> list[Counts]:
    """The plugin's file: "<instructions> <cycles>" for the whole stretch, then per segment."""
    try:
        counted = [Counts(int(a), int(b)) for a, b in (line.split() for line in text.splitlines())]
    except ValueError:
        counted = []
    if not counted:
        raise ToolchainError(f"QEMU plugin wrote unreadable counts: {text[:200]!r}")
    return counted


def elf_size(tools: ArmTools, elf: Path | str) -> dict[str, int]:
    """Berkeley sizes from arm-none-eabi-size: text (code + constants, flash), data
    (initialised RAM, also stored in flash), bss (zeroed RAM, including the linker
    script's heap and stack reservations)."""
    output = _run([tools.size, "-B", "-d", elf], f"arm-none-eabi-size {elf}",
                  TOOL_TIMEOUT_S).stdout
    lines = [line.split() for line in output.splitlines() if line.strip()]
    if len(lines) < 2 or lines[0][:3] != ["text", "data", "bss"]:
        raise ToolchainError(f"unexpected arm-none-eabi-size output:\n{output}")
    try:
        text, data, bss = (int(value) for value in lines[1][:3])
    except ValueError:
        raise ToolchainError(f"unexpected arm-none-eabi-size output:\n{output}") from None
    return {"text": text, "data": data, "bss": bss}


def build_firmware(tools: ArmTools, sources: list[Path], link_script: Path, output: Path,
                   flags: tuple[str, ...] = ("-O2", "-std=c99"),
                   timeout: float = TOOL_TIMEOUT_S) -> Path:
    """Compile and link Cortex-M4 firmware with templates/project/startup_m4.c; a budget
    overflow fails here with ld's message (`region `RAM' overflowed ...`)."""
    startup = templates_dir() / "project" / "startup_m4.c"
    _run([tools.gcc, *M4_CFLAGS, *flags, *M4_LDFLAGS, "-T", link_script,
          "-o", output, *sources, startup], f"building {Path(output).name}", timeout)
    return Path(output)
