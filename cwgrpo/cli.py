"""The ``cwgrpo`` command line: one subcommand per workflow step.

Each subcommand's module (``configure_parser(parser)``, ``run(args)``) is imported only when it runs, so
``cwgrpo --help`` is instant. Expected failures print one line naming the problem and exit with status 2;
``CWGRPO_DEBUG=1`` shows the traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

# name -> (module, one-line help). Order is the order of the pipeline.
LIBRARY_COMMANDS: dict[str, tuple[str, str]] = {
    "prepare-data": (
        "cwgrpo.data.prepare_data",
        "write a training set or benchmark to a local JSONL file with a manifest",
    ),
    "fetch-model": (
        "cwgrpo.models.hub",
        "a Hub model, local model folder or GGUF file -> a local model folder",
    ),
    "build-tiny": ("cwgrpo.models.tiny", "build the offline tiny tokenizer and model (tiny preset)"),
    "sft": ("cwgrpo.models.sft", "supervised warm-up of a tiny model into a 'base' model (tiny preset)"),
    "train": (
        "cwgrpo.train.run",
        "GRPO / CW-GRPO / Clip-Cov / KL-Cov training with checkpoint markers, resumable",
    ),
    "evaluate": ("cwgrpo.evaluate.run", "sample k answers per problem of a benchmark and grade them"),
    "grade": (
        "cwgrpo.evaluate.grade",
        "one verdict per answer under the strict (ours) or paper (lighteval) metric",
    ),
}


def _plugin_commands() -> tuple[dict[str, tuple[str, str]], dict[str, str]]:
    """Commands of installed packages (``cwgrpo.commands`` entry points): the workflow's, when installed."""
    from importlib.metadata import entry_points

    commands: dict[str, tuple[str, str]] = {}
    extras: dict[str, str] = {}
    for entry in entry_points(group="cwgrpo.commands"):
        try:
            plugin = entry.load()
        except ImportError:  # its package is not importable here (e.g. a stage's venv without it)
            continue
        commands.update(plugin.COMMANDS)
        extras.update(getattr(plugin, "EXTRA_OF_PACKAGE", {}))
    return commands, extras


_PLUGINS, EXTRA_OF_PACKAGE = _plugin_commands()
# Every command: the library's, then the installed workflow's.
COMMANDS: dict[str, tuple[str, str]] = {**LIBRARY_COMMANDS, **_PLUGINS}


def _top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cwgrpo",
        description="CW-GRPO replication package. Run `cwgrpo COMMAND --help` for a command's options.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n" + "\n".join(f"  {n:<13} {h}" for n, (_, h) in COMMANDS.items()),
    )
    parser.add_argument("--version", action="store_true", help="print the package version and exit")
    parser.add_argument("command", nargs="?", choices=sorted(COMMANDS), metavar="COMMAND")
    return parser


def _log_resource_use(name: str) -> None:
    """Log the command's CPU seconds (children included), which benchmarks/bench_tiny_jobs.py reads."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    logging.getLogger("cwgrpo.cli").info("resource use: cwgrpo %s: %.2f s CPU (user+sys)", name, cpu)


def _naming_missing_extras(name: str, call: Callable[..., T], *args: Any) -> T:
    """``call(*args)``, a missing module that an extra provides becoming a ConfigError naming that extra."""
    from cwgrpo.extras import missing_extra_error

    try:
        return call(*args)
    except ModuleNotFoundError as err:
        advice = missing_extra_error(err, f"cwgrpo {name}")
        if advice is None:
            raise
        raise advice from err


def refuse_overwriting_inputs(module: Any, parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """No command writes over what it reads: every ``Path`` argument is an input unless its ``dest`` is in the
    module's ``OUTPUTS``; ``file_arguments(args)`` adds files named elsewhere (a ``--set path=``), and
    ``NAMED_INPUT_FOLDERS`` lists folders of which only the named files are inputs.
    """
    from cwgrpo.io import check_arguments_not_overwritten, check_outputs_distinct

    outputs_dests = getattr(module, "OUTPUTS", ())
    skipped = getattr(module, "NAMED_INPUT_FOLDERS", ())
    outputs: list[Path] = []
    for action in parser._actions:
        value = getattr(args, action.dest, None)
        if action.type is not Path or value is None or action.dest not in outputs_dests:
            continue
        values = value if isinstance(value, list) else [value]
        outputs.extend(values)
        for path in values if not action.dest.endswith("dir") else []:
            if Path(path).is_dir():
                raise ValueError(f"{action.option_strings[0]} {path}: a folder; name the file to write")
    # first: file_arguments may read an input
    check_arguments_not_overwritten(args, outputs_dests, skip=skipped)
    more_inputs, more_outputs = module.file_arguments(args) if hasattr(module, "file_arguments") else ([], [])
    check_outputs_distinct([*outputs, *more_outputs])
    check_arguments_not_overwritten(args, outputs_dests, more_inputs, more_outputs, skip=skipped)


def _one_line_error(prog: str, err: BaseException) -> int:
    """Print an expected failure as one line naming the problem (``CWGRPO_DEBUG=1``: the traceback)."""
    if os.environ.get("CWGRPO_DEBUG"):
        raise err
    one_line = " ".join(line.strip() for line in str(err).splitlines() if line.strip())
    message = out_of_memory_message(err) or one_line
    print(f"{prog}: error: {message or type(err).__name__}", file=sys.stderr)
    return 2


def run_checked(
    module: Any, parser: argparse.ArgumentParser, argv: Sequence[str] | None, run: Callable[[Any], Any]
) -> int:
    """The one path of every entry point: parse, ``refuse_overwriting_inputs``, then ``run(args)``."""
    from cwgrpo.configs import ConfigError
    from cwgrpo.io import ResultFileError

    args = parser.parse_args(argv)
    try:
        refuse_overwriting_inputs(module, parser, args)
        return int(run(args) or 0)
    except (ConfigError, ResultFileError, OSError, ValueError) as err:  # OSError: unreadable/unwritable paths
        return _one_line_error(parser.prog, err)


# Under a small ``ulimit -v`` ``import torch`` aborts from C++ (measured: at 400 MiB, not at 800 MiB) before
# Python can report anything, so these commands check the limit first.
TORCH_COMMANDS = frozenset({"build-tiny", "sft", "train", "evaluate"})
TORCH_MIN_ADDRESS_SPACE_MIB = 1024
OUT_OF_MEMORY_ADVICE = (
    "free memory, give the command less to do at once (e.g. fewer --processes), or raise the limit"
)


def address_space_limit_mib() -> float | None:
    """This process's address-space limit (``ulimit -v``) in MiB, or None without one."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft / 2**20


def out_of_memory_message(err: BaseException) -> str | None:
    """One line for an error that is really a lack of memory, else None."""
    import errno

    text = str(err)
    if not (
        isinstance(err, MemoryError)
        or (isinstance(err, OSError) and err.errno == errno.ENOMEM)
        or (isinstance(err, ImportError) and ("failed to map segment" in text or "allocate memory" in text))
        or (isinstance(err, RuntimeError) and text == "can't start new thread")  # no memory for its stack
    ):
        return None
    limit = address_space_limit_mib()
    where = f" (address-space limit, ulimit -v: {limit:.0f} MiB)" if limit is not None else ""
    detail = " ".join(text.split())
    return f"out of memory{where}: {detail + ': ' if detail else ''}{OUT_OF_MEMORY_ADVICE}"


def check_memory_limit(name: str) -> None:
    """Refuse, in one line, a torch command whose address-space limit is too small to load torch."""
    limit = address_space_limit_mib()
    if name in TORCH_COMMANDS and limit is not None and limit < TORCH_MIN_ADDRESS_SPACE_MIB:
        raise MemoryError(
            f"loading torch needs about {TORCH_MIN_ADDRESS_SPACE_MIB} MiB of address space and would abort"
        )


def stage_python_var(name: str) -> str:
    """The environment variable naming command ``name``'s interpreter: CWGRPO_TRAIN_PYTHON, ..."""
    return f"CWGRPO_{name.upper().replace('-', '_')}_PYTHON"


# Set in the process a stage's interpreter replaced: the variable it came from, so that a wrapper (a pyenv
# shim, a conda or module script) whose path never equals sys.executable is taken once, not in a loop.
STAGE_MARK = "CWGRPO_STAGE_PYTHON_TAKEN"
# What the package needs of a stage's interpreter (pyproject's requires-python).
MIN_PYTHON = (3, 11)


def stage_python(name: str, env: Mapping[str, str]) -> str | None:
    """The interpreter command ``name`` must run under (``CWGRPO_<NAME>_PYTHON``), or None: this one."""
    var = stage_python_var(name)
    python = env.get(var)
    if not python or env.get(STAGE_MARK) == var or os.path.abspath(python) == os.path.abspath(sys.executable):
        return None
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        raise FileNotFoundError(
            f"{var}={python}: no such interpreter; point it at a venv's bin/python, or unset it"
        )
    code = "import sys; print('python', *sys.version_info[:2])"
    try:
        said = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=120
        ).stdout.split()
    except (OSError, subprocess.SubprocessError) as err:
        said = [str(err)]
    ok = len(said) == 3 and said[0] == "python" and all(part.isdigit() for part in said[1:])
    if not ok or tuple(int(part) for part in said[1:]) < MIN_PYTHON:
        raise FileNotFoundError(
            f"{var}={python}: not a Python {'.'.join(map(str, MIN_PYTHON))} or newer (asked its version, it "
            f"answered {' '.join(said)[:80] or 'nothing'!r}); point it at a venv's bin/python, or unset it"
        )
    return python


def checkout_first(env: Mapping[str, str]) -> str:
    """``PYTHONPATH`` with this checkout's package first, for another interpreter."""
    root = str(Path(__file__).resolve().parents[1])
    paths = [root, *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    return os.pathsep.join(dict.fromkeys(paths))


def _exec_in(python: str, argv: Sequence[str]) -> None:
    """Replace this process by ``python -m cwgrpo.cli ARGV`` (so the job's signals still reach it)."""
    env = {
        **os.environ,
        "PYTHONPATH": checkout_first(os.environ),
        STAGE_MARK: stage_python_var(argv[0]),
    }
    os.execve(python, [python, "-m", "cwgrpo.cli", *argv], env)


def main(argv: Sequence[str] | None = None) -> int:
    from cwgrpo.launch.workers import tie_worker
    from cwgrpo.seeding import portable_cpu_numerics

    portable_cpu_numerics()  # before anything loads torch
    tie_worker(os.environ)  # a training process of `cwgrpo.launch.workers`: dies with its agent
    argv = list(sys.argv[1:] if argv is None else argv)
    name = f" {argv[0]}" if argv and argv[0] in COMMANDS else ""
    try:
        return _main(argv)
    except KeyboardInterrupt:  # Ctrl-C, or a user's function raising it: one line, not a traceback
        if os.environ.get("CWGRPO_DEBUG"):
            raise
        print(f"cwgrpo{name}: interrupted", file=sys.stderr)
        return 130
    except (MemoryError, ImportError, OSError, RuntimeError) as err:
        if out_of_memory_message(err) is None:
            raise
        return _one_line_error(f"cwgrpo{name}", err)


def _main(argv: list[str]) -> int:
    top = _top_parser()
    if not argv or argv[0] in ("-h", "--help"):
        top.print_help()
        return 0
    if argv[0] == "--version":
        from cwgrpo import __version__

        print(f"cwgrpo {__version__}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in COMMANDS:
        top.error(f"unknown command {name!r}; known: {', '.join(COMMANDS)}")
    try:
        python = stage_python(name, os.environ)
    except FileNotFoundError as err:
        print(f"cwgrpo {name}: error: {err}", file=sys.stderr)
        return 2
    if python is not None:
        _exec_in(python, argv)
    module_name, help_text = COMMANDS[name]
    logging.basicConfig(
        level=os.environ.get("CWGRPO_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    from cwgrpo.configs import ConfigError
    from cwgrpo.extras import require_extra

    if not {"-h", "--help"} & set(rest):
        check_memory_limit(name)
    try:
        for package, extra in EXTRA_OF_PACKAGE.items():
            if module_name.startswith(f"{package}."):
                require_extra(extra, f"cwgrpo {name}")
        # e.g. a GGUF file without the gguf extra: one line naming the extra
        module = _naming_missing_extras(name, importlib.import_module, module_name)
    except (ConfigError, OSError, ValueError) as err:
        return _one_line_error(f"cwgrpo {name}", err)
    parser = argparse.ArgumentParser(
        prog=f"cwgrpo {name}", description=help_text, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    module.configure_parser(parser)

    def run(args: argparse.Namespace) -> int:
        code = _naming_missing_extras(name, module.run, args)  # optional libraries imported where used
        if name != "plan":  # a DAG job's; `make tiny` prints the plan's lines alone
            _log_resource_use(name)
        return code

    return run_checked(module, parser, rest, run)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
