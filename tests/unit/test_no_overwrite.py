"""No command writes over what it reads: one walk over every command with file arguments (issue 25).

For each command, each output argument is pointed at each input argument's file (the same path, a symlink
to it, a hard link to it); the command must exit 2 with one line naming both, and leave the input as it was.
"""

from __future__ import annotations

import argparse
import importlib
import os
import shutil
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


def _one_line_refusal(argv: list[str], capsys, *words: str) -> str:
    assert cli.main(argv) == 2, argv
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and all(w in err for w in words), err
    return err


def _user_folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.jsonl").write_text(PRECIOUS)
    return path


def _sft_argv(model_dir: Path, tmp: Path, out_dir: str) -> list[str]:
    data = tmp / "train.jsonl"
    data.write_text('{"problem": "1+1", "answer": "2"}\n')
    return [
        "sft", "--model-dir", str(model_dir), "--train-data", str(data), "--dev-data", str(data),
        "--out-dir", out_dir, "--marker", str(tmp / "base.json"),
        "--set", "max_steps=1", "--set", "batch_size=1", "--set", "eval_every=1",
    ]  # fmt: skip


@pytest.mark.parametrize("command", ["build-tiny", "sft", "fetch-model"])
def test_model_commands_never_replace_a_folder_they_did_not_write(
    command, tmp_path, tiny_model_dir, capsys, monkeypatch
):
    """A user's folder, the current folder, a file, and a link named as ``--out-dir`` are refused before
    anything is written; each keeps what it held."""
    work = tmp_path / "work"
    user, linked = _user_folder(work / "mine"), _user_folder(tmp_path / "linked")
    (work / "link").symlink_to(linked)
    monkeypatch.chdir(work)
    for out, words in (
        (str(user), ("holds files cwgrpo did not write", "mine")),
        (".", ("holds the current folder",)),
        (str(user / "results.jsonl"), ("is a file",)),
        ("link", ("symbolic link",)),
    ):
        argv = {
            "build-tiny": ["build-tiny", "--size", "small", "--out-dir", out, "--marker", str(tmp_path / "m.json")],
            "fetch-model": ["fetch-model", "--source", str(tiny_model_dir), "--out-dir", out,
                            "--marker", str(tmp_path / "m.json")],
            "sft": _sft_argv(tiny_model_dir, tmp_path, out),
        }[command]  # fmt: skip
        _one_line_refusal(argv, capsys, f"output folder {out}", *words)
        assert sorted(p.name for p in work.iterdir()) == ["link", "mine"], out
        for folder in (user, linked):
            assert [p.name for p in folder.iterdir()] == ["results.jsonl"], out
            assert (folder / "results.jsonl").read_text() == PRECIOUS, out


def test_build_tiny_replaces_its_own_folder_and_takes_an_empty_one(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "new", tmp_path / "empty"):
        argv = ["build-tiny", "--size", "small", "--out-dir", str(out), "--marker", str(tmp_path / "m.json")]
        assert cli.main(argv) == 0
        (out / "weights.tmp").write_text("x")  # the folder as written, then as a previous rerun left it
        (out / "weights.tmp").unlink()
        before = (out / "config.json").stat().st_ino
        assert cli.main(argv) == 0, capsys.readouterr().err
        assert (out / "config.json").stat().st_ino != before  # written afresh
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty", "m.json", "new"]  # no temporary left


@pytest.mark.parametrize("change", ["copy with files added", "file changed", "older mark"])
def test_a_folder_cwgrpo_wrote_is_replaced_only_as_it_wrote_it(tmp_path, capsys, change):
    """Bug: `cp -r` of a folder cwgrpo wrote kept its mark, so build-tiny replaced the copy with a random
    model, deleting the user's adapter and notes. The mark lists the files and sizes cwgrpo wrote; a folder
    holding anything else is refused, and keeps it."""
    built = tmp_path / "built"
    argv = ["build-tiny", "--size", "small", "--out-dir", str(built), "--marker", str(tmp_path / "m.json")]
    assert cli.main(argv) == 0
    out = tmp_path / "my-model"
    shutil.copytree(built, out)
    if change == "copy with files added":
        (out / "my-lora").mkdir()
        (out / "my-lora" / "adapter.bin").write_bytes(b"\x00" * 64)
        (out / "NOTES.txt").write_text(PRECIOUS)
        words = ("holds files cwgrpo did not write there, or changed (NOTES.txt, my-lora/adapter.bin)",)
    elif change == "file changed":
        (out / "config.json").write_text("{}")
        words = ("holds files cwgrpo did not write there, or changed (config.json)",)
    else:
        (out / ".cwgrpo-owned").write_text("written by cwgrpo, which may replace this folder\n")
        words = ("has a mark that lists no files",)
    kept = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    argv[argv.index(str(built))] = str(out)
    capsys.readouterr()  # the first build's output
    _one_line_refusal(argv, capsys, f"output folder {out}", *words)
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == kept
    argv[argv.index(str(out))] = str(built)
    assert cli.main(argv) == 0  # the folder as cwgrpo wrote it is still replaced


def test_sft_refuses_an_out_dir_that_holds_its_model(tmp_path, tiny_model_dir, capsys):
    """``--out-dir`` above ``--model-dir`` would delete the model it reads."""
    shutil.copytree(tiny_model_dir, tmp_path / "models" / "init")
    argv = _sft_argv(tmp_path / "models" / "init", tmp_path, str(tmp_path / "models"))
    _one_line_refusal(argv, capsys, "would overwrite the input")
    assert (tmp_path / "models" / "init" / "config.json").is_file()
