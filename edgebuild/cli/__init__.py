"""The `edgebuild` command. Exit status: 0 success, 1 a stage failed, 2 a user error.

Imports are deferred into each command so `check`, `status` and a no-op build never pay
for torch (and `--help` pays for almost nothing).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from edgebuild import __version__
from edgebuild.core.errors import (
    EXIT_INTERRUPTED,
    EXIT_STAGE_FAILED,
    EXIT_USER_ERROR,
    UserError,
    describe,
)

STAGE_NAMES = ("validate", "data", "train", "qat", "quantize", "onnx", "evaluate", "plan",
               "accelerator", "codegen", "kat", "ondevice", "ondevice_kat",
               "report")  # == edgebuild.pipeline.stages.STAGES (tested)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="edgebuild", description="Build tiny neural networks from a manifest: train, "
        "quantize, plan memory and generate a tested C project. With no command, builds "
        "every manifest of the project in the current directory.")
    parser.add_argument("--version", action="version", version=f"edgebuild {__version__}")
    parser.add_argument("-C", dest="directory", default=".", help="run as if started in DIR")
    parser.add_argument("--debug", action="store_true",
                        help="show Python tracebacks of internal errors instead of one line")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    build = commands.add_parser("build", help="build manifests (the default command)")
    _paths(build)
    build.add_argument("--until", choices=STAGE_NAMES, help="stop after this stage")
    build.add_argument("-j", "--jobs", type=int, default=1, help="parallel stages (processes)")
    build.add_argument("-v", "--verbose", action="store_true",
                       help="a line for every stage, also those up to date")
    build.add_argument("--json", action="store_true",
                       help="print one JSON object with every stage's outcome on stdout")
    build.add_argument("--locked", action="store_true",
                       help="CI mode: fail if any key or output digest differs from edgebuild.lock")
    build.add_argument("--relock", action="store_true",
                       help="rebuild here every stage whose output contradicts edgebuild.lock "
                       "under the same key (otherwise an integrity error), take nothing from "
                       "a remote, and record what was built")
    _cache_dir(build)
    _remote(build)
    build.add_argument("--push", action="store_true",
                       help="also write what this build computes to the remote cache (default: "
                       "read only, unless EDGEBUILD_REMOTE_PUSH=1; CI's job, see README)")
    build.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the stages on a Dask cluster (tcp://host:8786); workers "
                       "share results through the remote cache. Default: "
                       "EDGEBUILD_SCHEDULER, else edgebuild.toml's [cluster] scheduler")

    check = commands.add_parser("check", help="validate manifests only (fast, no training)")
    _paths(check)

    status = commands.add_parser("status", help="what is up to date, what would run, and why")
    _paths(status)
    _cache_dir(status)

    schema = commands.add_parser("schema", help="print the manifest JSON Schema")
    schema.add_argument("-o", "--output", help="write to this file instead of stdout")

    init = commands.add_parser("init", help="scaffold a working project in a directory")
    init.add_argument("target", metavar="DIR", nargs="?", default=".",
                      help="where (default: here)")  # not `directory`: that is -C
    init.add_argument("--name", default="digits", help="manifest name (default: digits)")
    init.add_argument("--no-git", dest="git", action="store_false",
                      help="do not make the directory a git repository (default: git init "
                      "and stage the files, unless already inside one)")

    export = commands.add_parser(
        "export", help="copy the generated model files into your firmware (user files are kept)")
    _paths(export)
    export.add_argument("--to", required=True, metavar="DIR", help="destination directory")
    export.add_argument("--name", help="which manifest (needed when the project has several)")
    export.add_argument("--force", action="store_true",
                        help="overwrite files edgebuild did not write or that were edited")
    _cache_dir(export)

    imports = commands.add_parser(
        "import-ai8x", help="turn a MAX7800x network YAML (+ quantized checkpoint) into a manifest")
    imports.add_argument("network", metavar="NETWORK.yaml", help="the ai8x network description")
    imports.add_argument("--checkpoint", metavar="Q.pth.tar", help="its quantized checkpoint")
    imports.add_argument("--sample", metavar="INPUT.npy", help="sample input (becomes the kat)")
    imports.add_argument("--expected", metavar="OUTPUT.npy",
                         help="the toolchain's known answer for the sample")
    imports.add_argument("--device", help="max78000 or max78002 (default: from arch, ai85/ai87)")
    imports.add_argument("--name", help="manifest name (default: from arch)")
    imports.add_argument("--input", metavar="C,H,W", help="input shape when nothing else gives it")
    imports.add_argument("-o", "--output", default=".", metavar="DIR",
                         help="where the manifest and its files go (default: .)")

    compare = commands.add_parser(
        "compare-ai8x", help="compare two MAX7800x accelerator programs (MSDK project "
        "directories or canonical JSON): exit 0 identical, 1 different")
    compare.add_argument("first", metavar="A", help="a project directory (cnn.c, weights.h, "
                         "main.c, sampledata.h, sampleoutput.h) or a program .json[.gz]")
    compare.add_argument("second", metavar="B", help="the same, to compare with")
    compare.add_argument("--limit", type=int, default=40,
                         help="differences to list (default 40; 0: all)")

    onnx = commands.add_parser(
        "import-onnx", help="turn a float ONNX model into a manifest and float weights it "
        "starts from (train.init)")
    onnx.add_argument("model", metavar="MODEL.onnx", help="the float model (one input, "
                      "batch first: [N, features], [N, C, L] or [N, C, H, W])")
    onnx.add_argument("-o", "--output", metavar="MANIFEST.yaml",
                      help="the manifest to write (a directory: <name>.yaml in it); its "
                      "weights go beside it as <stem>.float.npz (default: <name>.yaml here)")
    onnx.add_argument("--name", help="manifest name (default: from the file name)")
    onnx.add_argument("--data", metavar="DATA.npz",
                      help="the dataset the manifest names (format npz: x, y or x_train, "
                      "y_train, x_test, y_test); without it, add a dataset before building")

    tfl = commands.add_parser(
        "import-tflite", help="turn an int8 TFLite model into a manifest in TFLite's number "
        "format, its integers and a known answer")
    tfl.add_argument("model", metavar="MODEL.tflite", help="the int8 model (one input)")
    tfl.add_argument("-o", "--output", default=".", metavar="DIR",
                     help="where the manifest and its folder go (default: .)")
    tfl.add_argument("--name", help="manifest name (default: from the file name)")
    tfl.add_argument("--device", default="host", choices=("host", "cortex-m4"),
                     help="the target (default: host)")
    tfl.add_argument("--sample", metavar="IN.npy", help="known-answer inputs as the "
                     "interpreter takes them (N x NHWC, the model's input dtype)")
    tfl.add_argument("--expected", metavar="OUT.npy", help="the interpreter's outputs for "
                     "them (default: LiteRT's reference kernels compute them)")

    clean = commands.add_parser("clean", help="delete build outputs (the cache is kept)")
    _paths(clean)
    clean.add_argument("--cache", action="store_true", help="delete the whole cache as well")
    _cache_dir(clean)

    cache = commands.add_parser("cache", help="cache maintenance")
    actions = cache.add_subparsers(dest="cache_command", metavar="ACTION", required=True)
    gc = actions.add_parser("gc", help="delete unreferenced entries by age and size")
    gc.add_argument("--max-size", default=None, help="keep the cache under this size (e.g. 2GiB)")
    gc.add_argument("--max-age", type=float, default=None, help="delete entries unused for N days")
    _paths(gc)
    _cache_dir(gc)
    verify = actions.add_parser("verify", help="re-hash every entry and report corrupt ones")
    verify.add_argument("--delete", action="store_true", help="delete corrupt entries")
    _paths(verify)
    _cache_dir(verify)
    push = actions.add_parser("push", help="upload the entries the manifests use to the "
                              "remote cache")
    push.add_argument("--all", action="store_true", help="every local entry, used or not")
    pull = actions.add_parser("pull", help="download the entries edgebuild.lock names from "
                              "the remote cache into the local one")
    listing = actions.add_parser("ls", help="list the remote cache's entries")
    for command in (push, pull, listing):
        _paths(command)
        _cache_dir(command)
        _remote(command)
    return parser


def _paths(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="manifest files or project directories (default: current directory)")


def _remote(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--remote", metavar="URL",
                        help="shared remote cache: a directory or any fsspec URL (s3://bucket/"
                        "prefix, ...); default: EDGEBUILD_REMOTE, else edgebuild.toml's "
                        "[cache] remote; '' for none")


def _cache_dir(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cache-dir", help="cache location (default: EDGEBUILD_CACHE or ./cache)")


def entry() -> None:
    """The `edgebuild` program: `main` under the interrupt supervisor (cli/supervisor.py)."""
    from edgebuild.cli import supervisor

    sys.exit(supervisor.run(main))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command is None:  # bare `edgebuild`: build the project here
        args = argparse.Namespace(**vars(args), paths=[], until=None, jobs=1, json=False,
                                  locked=False, relock=False, cache_dir=None,
                                  remote=None, scheduler=None, verbose=False, push=False)
        args.command = "build"
    try:
        os.chdir(args.directory)
        from edgebuild.cli import commands
        return getattr(commands, args.command.replace("-", "_"))(args, Path.cwd())
    except UserError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic.render(), file=sys.stderr)
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        print("edgebuild: interrupted; finished stages are cached, the interrupted one "
              "left nothing behind", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # stdout's reader went away (`edgebuild status | head`): stop quietly, as Unix
        # tools do, and keep Python from failing again when it flushes stdout at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_STAGE_FAILED
    except OSError as exc:
        print(f"edgebuild: {describe(exc)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except Exception as exc:
        if args.debug:
            raise
        print(f"edgebuild: internal error {type(exc).__name__}: {exc} (run with --debug for "
              "the traceback, and please report it)", file=sys.stderr)
        return EXIT_STAGE_FAILED
