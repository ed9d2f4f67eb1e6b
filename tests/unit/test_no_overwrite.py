"""No command writes over what it reads: one walk over every command with file arguments (issue 25).

For each command, each output argument is pointed at each input argument's file (the same path, a symlink
to it, a hard link to it); the command must exit 2 with one line naming both, and leave the input as it was.
"""

from __future__ import annotations

import argparse
import importlib
import os
from pathlib import Path

import pytest

from cwgrpo import cli

PRECIOUS = '{"completion": "\\\\boxed{1}", "gold": "1", "gold_kind": "expr"}\n'


def _parser(command: str) -> tuple[object, argparse.ArgumentParser]:
    module = importlib.import_module(cli.COMMANDS[command][0])
    parser = argparse.ArgumentParser(prog=f"cwgrpo {command}")
    module.configure_parser(parser)
    return module, parser


def _path_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [a for a in parser._actions if a.type is Path and a.option_strings]


def _pairs() -> list[tuple[str, str, str]]:
    """(command, output dest, input dest) for every command with file arguments."""
    pairs = []
    for command in cli.COMMANDS:
        module, parser = _parser(command)
        outputs = getattr(module, "OUTPUTS", ())
        actions = _path_actions(parser)
        for out in (a for a in actions if a.dest in outputs):
            pairs += [(command, out.dest, a.dest) for a in actions if a.dest not in outputs]
    return pairs


def _argv(parser: argparse.ArgumentParser, tmp: Path, chosen: dict[str, Path]) -> list[str]:
    """A command line with every required argument, the ``chosen`` path arguments as given."""
    argv: list[str] = []
    for action in parser._actions:
        if not action.option_strings or action.dest == "help":
            continue
        flag = action.option_strings[0]
        if action.dest in chosen:
            argv += [flag, str(chosen[action.dest])]
        elif action.type is Path and (action.required or action.dest in ("model_dir", "out", "summary")):
            other = tmp / f"other-{action.dest}"
            other.write_text("x\n")
            argv += [flag, str(other)]
        elif action.required:
            argv += [flag, str(action.choices[0]) if action.choices else "x/y"]
    return argv


def _links(tmp: Path, source: Path) -> dict[str, Path]:
    symlink, hardlink = tmp / "symlink.jsonl", tmp / "hardlink.jsonl"
    symlink.symlink_to(source)
    os.link(source, hardlink)
    return {"same path": source, "symlink": symlink, "hard link": hardlink}


def _refused(argv: list[str], source: Path, capsys) -> None:
    assert cli.main(argv) == 2, argv
    err = capsys.readouterr().err
    assert "would overwrite the input" in err and err.count("\n") == 1, err
    assert source.read_text() == PRECIOUS, argv


def test_every_command_refuses_an_output_that_is_one_of_its_inputs(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    pairs = _pairs()
    commands = {c for c, _, _ in pairs}
    assert {"prepare-data", "grade", "evaluate", "train", "sft", "fetch-model", "build-tiny"} <= commands
    assert {"table", "figure", "claims", "study"} <= commands
    for n, (command, out, inp) in enumerate(pairs):
        _, parser = _parser(command)
        folder = tmp_path / f"case{n}"
        folder.mkdir()
        source = folder / "input.jsonl"
        source.write_text(PRECIOUS)
        for target in _links(folder, source).values():
            _refused([command, *_argv(parser, folder, {inp: source, out: target})], source, capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["prepare-data", "--dataset", "mine", "--set", "path={src}", "--out", "{out}"],
        ["fetch-model", "--source", "{src}", "--out-dir", "{out}", "--marker", "m.json"],
        ["grade", "--metric", "strict", "--in", "{src}", "--out", "{out}"],
    ],
)
def test_inputs_named_outside_path_arguments_are_inputs_too(tmp_path, capsys, monkeypatch, argv):
    """The data file of ``--set path=`` and a local model ``--source`` are read as well."""
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "input.jsonl"
    source.write_text(PRECIOUS)
    for target in _links(tmp_path, source).values():
        _refused([a.format(src=source, out=target) for a in argv], source, capsys)


def test_prepare_data_refuses_a_manifest_that_is_its_input(tmp_path, capsys):
    source = tmp_path / "mine.manifest.json"
    source.write_text(PRECIOUS)
    argv = [
        "prepare-data",
        "--dataset",
        "mine",
        "--set",
        f"path={source}",
        "--out",
        str(tmp_path / "mine.jsonl"),
    ]
    _refused(argv, source, capsys)
