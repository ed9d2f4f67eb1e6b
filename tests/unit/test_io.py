"""Writers at the edges (cwgrpo.io): whole folders replaced only where cwgrpo wrote them, logs never
appended through a link, CSV cells never formulas."""

from __future__ import annotations

import pytest

from cwgrpo.io import OWNED_MARK, append_jsonl, csv_safe, owned_dir


def test_a_failed_build_leaves_the_previous_folder_and_no_temporary(tmp_path):
    target = tmp_path / "model"
    with owned_dir(target) as tmp:
        (tmp / "weights").write_text("old\n")
    assert (target / OWNED_MARK).is_file()
    with pytest.raises(RuntimeError, match="cut"), owned_dir(target) as tmp:
        (tmp / "weights").write_text("half\n")
        raise RuntimeError("cut")
    assert (target / "weights").read_text() == "old\n"
    with owned_dir(target) as tmp:
        (tmp / "weights").write_text("new\n")
    assert (target / "weights").read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_folder_that_appears_meanwhile_is_not_replaced(tmp_path):
    """Checked again before the move: a folder a user made while the model was built is kept."""
    target = tmp_path / "model"
    with pytest.raises(ValueError, match="holds files cwgrpo did not write"), owned_dir(target) as tmp:
        (tmp / "weights").write_text("new\n")
        target.mkdir()
        (target / "notes.txt").write_text("mine\n")
    assert [p.name for p in target.iterdir()] == ["notes.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]


def test_a_log_planted_as_a_link_is_not_appended_to(tmp_path):
    victim = tmp_path / "thesis.tex"
    victim.write_text("precious\n")
    (tmp_path / "metrics.jsonl").symlink_to(victim)
    with pytest.raises(OSError, match=r"metrics\.jsonl is a symbolic link"):
        append_jsonl(tmp_path / "metrics.jsonl", {"step": 1})
    assert victim.read_text() == "precious\n"
    append_jsonl(tmp_path / "log.jsonl", {"step": 1})
    append_jsonl(tmp_path / "log.jsonl", {"step": 2})
    assert (tmp_path / "log.jsonl").read_text() == '{"step": 1}\n{"step": 2}\n'


@pytest.mark.parametrize(
    "value, written",
    [
        ("=1+1", "'=1+1"),
        ("+SUM(A1)", "'+SUM(A1)"),
        ("-2+3", "'-2+3"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("-1.5", "-1.5"),
        ("GRPO", "GRPO"),
        (-1.5, -1.5),
        (None, None),
    ],
)
def test_csv_cells_a_spreadsheet_would_run_are_quoted(value, written):
    assert csv_safe(value) == written


def test_an_unwritable_folder_is_named_by_the_output_asked_for_not_a_temporary():
    """``/sys`` takes no new files, even from root: the error names the path given."""
    from cwgrpo.io import write_text

    with pytest.raises(OSError, match=r"^\[Errno \d+\] cannot write /sys/out\.json: "):
        write_text("/sys/out.json", "x")
    with pytest.raises(OSError, match=r"^\[Errno \d+\] cannot write /sys/model: "), owned_dir("/sys/model"):
        pass


def test_a_claimed_folder_takes_a_resumed_download_until_it_is_sealed(tmp_path):
    """A download writes in place (claimed: any files); once done, its mark lists them, as owned_dir's does."""
    from cwgrpo.io import check_replaceable_dir, claim_dir, seal_dir

    target = claim_dir(tmp_path / "model")
    (target / "half.bin").write_bytes(b"12")
    check_replaceable_dir(target)  # a cut download resumes into it
    seal_dir(target)
    check_replaceable_dir(target)
    (target / "mine.txt").write_text("mine\n")
    with pytest.raises(ValueError, match=r"did not write there, or changed \(mine\.txt\)"):
        check_replaceable_dir(target)
