"""cwgrpo.data.registry: the dataset registry, normalisation of each dataset's row shape, prepare-data outputs and
load_records."""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import json
from pathlib import Path

import pytest

from cwgrpo import cli, paper
from cwgrpo.configs import ConfigError
from cwgrpo.data import prepare_data, synthetic
from cwgrpo.data import registry as data
from cwgrpo.data.rows import package_file
from cwgrpo.io import ResultFileError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "datasets"
HF_NAMES = ["open_rs", "aime24", "math500", "amc23", "minerva", "olympiadbench"]


def fixture_rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"{name}.jsonl").read_text().splitlines()]


def test_registry_has_paper_datasets_with_expected_rows():
    rows = {n: data.DATASETS[n].rows for n in HF_NAMES}
    assert rows == {
        "open_rs": 7000,
        "aime24": 30,
        "math500": 500,
        "amc23": 40,
        "minerva": 272,
        "olympiadbench": 675,
    }
    assert data.DATASETS["open_rs"].hf_id == "knoveleng/open-rs"
    assert data.DATASETS["math500"].split == "test"
    assert set(paper.BENCHMARKS) <= set(data.DATASETS)


def test_registry_synthetic_entries_match_synthetic_splits():
    for name, split in synthetic.SPLITS.items():
        spec = data.get_dataset(name)
        assert spec.synthetic and spec.rows == split.n and spec.source == f"synthetic:{name}"
    for name in ("syn_train", "syn_math500", "syn_amc23", "syn_olympiad", "syn_minerva", "syn_aime24"):
        assert name in data.DATASETS


def test_get_dataset_unknown_lists_names():
    with pytest.raises(ConfigError, match=r"unknown dataset 'nope'.*math500"):
        data.get_dataset("nope")


@pytest.mark.parametrize("name", HF_NAMES)
def test_normalise_fixture_gives_records(name):
    spec = data.DATASETS[name]
    records = data.normalise(spec, fixture_rows(name))
    assert len(records) == len(fixture_rows(name))
    for i, rec in enumerate(records):
        assert set(rec) == {"id", "problem", "answer", "source"} | (
            {"solution"} if spec.solution_column else set()
        )
        assert rec["id"] == f"{name}-{i:04d}"
        assert rec["source"] == spec.hf_id
        assert rec["problem"] and rec["answer"]
        assert "\\boxed" not in rec["answer"]


def test_normalise_answers_per_dataset_shape():
    answers = {n: [r["answer"] for r in data.normalise(data.DATASETS[n], fixture_rows(n))] for n in HF_NAMES}
    assert answers["amc23"] == ["27", "36", "45"]  # floats written as integers
    assert answers["minerva"] == ["0.49", "4.5e33", "\\frac{e^{t}} {3}+c e^{-2 t}"]  # last boxed of solution
    assert answers["olympiadbench"] == ["4", "\\frac{1}{2}", "3, -3"]  # $...$ stripped, lists joined
    assert answers["aime24"] == ["204", "113", "045"]
    assert answers["math500"][0] == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert answers["open_rs"] == ["9", "2", "5\\sqrt{2}"]


def test_normalise_open_rs_keeps_the_worked_solution_for_the_released_reward():
    rows = fixture_rows("open_rs")
    records = data.normalise(data.DATASETS["open_rs"], rows)
    assert [r["solution"] for r in records] == [row["solution"] for row in rows]
    assert all("solution" not in r for r in data.normalise(data.DATASETS["math500"], fixture_rows("math500")))


def test_normalise_olympiadbench_reads_question_column():
    records = data.normalise(data.DATASETS["olympiadbench"], fixture_rows("olympiadbench"))
    assert records[0]["problem"].startswith("Compute the number of ordered pairs")


def test_normalise_missing_column_names_dataset_column_and_columns_found():
    rows = [{"problem": "1+1?", "solution": "2"}]
    with pytest.raises(
        ValueError, match=r"dataset math500 .*missing column 'answer'.*\['problem', 'solution'\]"
    ):
        data.normalise(data.DATASETS["math500"], rows)


def test_normalise_solution_without_boxed_answer_is_an_error():
    rows = [{"problem": "p", "solution": "no box here"}]
    with pytest.raises(ValueError, match=r"minerva \(knoveleng/Minerva-Math\): row 0 has no \\boxed"):
        data.normalise(data.DATASETS["minerva"], rows)


def test_normalise_empty_answer_is_an_error():
    with pytest.raises(
        ValueError, match=r"aime24 \(HuggingFaceH4/aime_2024\): row 1 column .answer. is empty"
    ):
        data.normalise(
            data.DATASETS["aime24"], [{"problem": "a", "answer": "1"}, {"problem": "b", "answer": " "}]
        )


def test_normalise_binary_floats_are_their_shortest_text():
    """Bug: a float gold of 1e300 became a 301-digit integer whose digits past the 17th are made up."""
    import numpy as np

    rows = [{"problem": "p", "answer": a} for a in (27.0, 0.1, 1e300, 2.5e-7, -0.0, np.float32(123456.7))]
    answers = [r["answer"] for r in data.normalise(data.DATASETS["amc23"], rows)]
    assert answers == ["27", "0.1", "1e+300", "2.5e-07", "0", "123456.7"]


def test_check_row_count_mismatch_names_dataset_expected_and_found():
    spec = data.DATASETS["math500"]
    records = data.normalise(spec, fixture_rows("math500"))
    with pytest.raises(ValueError, match="dataset math500: expected 500 rows, found 4"):
        data.check_row_count(spec, records)


def test_check_row_count_zero_rows():
    with pytest.raises(ValueError, match=r"amc23 \(knoveleng/AMC-23\): zero rows"):
        data.check_row_count(data.DATASETS["amc23"], [])


def test_prepare_writes_jsonl_then_manifest(tmp_path):
    spec = dataclasses.replace(data.DATASETS["amc23"], rows=3)
    out = tmp_path / "data" / "amc23.jsonl"
    manifest = data.prepare(spec, out, rows=fixture_rows("amc23"))
    written = json.loads((tmp_path / "data" / "amc23.manifest.json").read_text())
    assert written == manifest
    assert set(written) == {
        "name", "hf_id", "revision", "split", "rows", "display", "mirrors", "sha256", "provenance"
    }  # fmt: skip
    assert written["rows"] == 3 and written["hf_id"] == "knoveleng/AMC-23" and written["split"] == "train"
    assert written["display"] == "AMC23" and written["mirrors"] == "amc23"  # a paper benchmark mirrors itself
    assert written["sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert data.load_records(out)[0]["answer"] == "27"


def test_prepare_row_mismatch_writes_nothing(tmp_path):
    out = tmp_path / "amc23.jsonl"
    with pytest.raises(ValueError, match="expected 40 rows, found 3"):
        data.prepare(data.DATASETS["amc23"], out, rows=fixture_rows("amc23"))
    assert list(tmp_path.iterdir()) == []


def test_prepare_crash_before_manifest_leaves_no_manifest(tmp_path, monkeypatch):
    spec = dataclasses.replace(data.DATASETS["amc23"], rows=3)

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(data, "write_json", boom)
    with pytest.raises(OSError, match="disk full"):  # the crash itself, not an error before it
        data.prepare(spec, tmp_path / "amc23.jsonl", rows=fixture_rows("amc23"))
    assert not (tmp_path / "amc23.manifest.json").exists()


def test_cli_prepare_data_synthetic(tmp_path):
    out = tmp_path / "syn_math500.jsonl"
    assert cli.main(["prepare-data", "--dataset", "syn_math500", "--out", str(out)]) == 0
    records = data.load_records(out)
    assert len(records) == synthetic.SPLITS["syn_math500"].n
    assert records == synthetic.generate_split("syn_math500")
    manifest = json.loads(data.manifest_path(out).read_text())
    assert (
        manifest["name"] == "syn_math500" and manifest["hf_id"] is None and manifest["rows"] == len(records)
    )
    # The split's display name and mirror travel with the data, into the summaries and the report.
    assert manifest["display"] == "Syn-L1 (≈MATH-500)" and manifest["mirrors"] == "math500"


def test_cli_prepare_data_unknown_dataset_exits_2(tmp_path, capsys):
    assert cli.main(["prepare-data", "--dataset", "nope", "--out", str(tmp_path / "x.jsonl")]) == 2
    assert "unknown dataset 'nope'" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def test_load_records_duplicate_id_named(tmp_path):
    rec = {"id": "a-1", "problem": "p", "answer": "1", "source": "s"}
    path = _write(tmp_path / "d.jsonl", [json.dumps(rec), json.dumps(rec)])
    with pytest.raises(ResultFileError, match="duplicate id 'a-1'"):
        data.load_records(path)


def test_load_records_missing_key_named(tmp_path):
    path = _write(tmp_path / "d.jsonl", [json.dumps({"id": "a", "problem": "p", "source": "s"})])
    with pytest.raises(ResultFileError, match=r"record 0 lacks \['answer'\]"):
        data.load_records(path)


def test_load_records_empty_and_missing_and_malformed(tmp_path):
    with pytest.raises(ResultFileError, match="no records"):
        data.load_records(_write(tmp_path / "empty.jsonl", []))
    with pytest.raises(ResultFileError, match="missing file"):
        data.load_records(tmp_path / "absent.jsonl")
    with pytest.raises(ResultFileError, match="not valid JSON"):
        data.load_records(_write(tmp_path / "bad.jsonl", ['{"id": "a", "prob']))


def test_manifest_path():
    assert data.manifest_path("results/x/data/math500.jsonl") == Path("results/x/data/math500.manifest.json")


# --------------------------------------------------------------------------------------------------
# cwgrpo.models.hub (the download itself is faked: no test touches the network)


def test_hub_sources_registry_and_errors():
    from cwgrpo.models import hub

    def hub_source(spec: str, revision: str | None) -> tuple[str, str, str | None]:
        source = hub.parse_source(spec, revision)
        return source.kind, source.location, source.revision

    assert hub_source("1.5b", None) == ("hub", "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "main")
    assert hub_source("7b", "abc123") == ("hub", "Qwen/Qwen2.5-Math-7B-Instruct", "abc123")
    assert hub_source("org/model", "v1") == ("hub", "org/model", "v1")
    with pytest.raises(ConfigError, match="needs a revision"):
        hub.parse_source("org/model", None)
    with pytest.raises(ConfigError, match="not a Hub id"):
        hub.parse_source("3b", None)


@pytest.fixture
def fake_hub(monkeypatch):
    import huggingface_hub

    calls = []
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):  # the fake Hub is "online"
        monkeypatch.delenv(name, raising=False)

    class FakeApi:
        def model_info(self, repo_id, revision, timeout=None):
            return type("Info", (), {"sha": "f" * 40})()

    def fake_snapshot_download(repo_id, revision, local_dir, **kwargs):
        calls.append((repo_id, revision))
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        if repo_id != "org/empty":
            (Path(local_dir) / "config.json").write_text("{}")
            (Path(local_dir) / "tokenizer.json").write_text("{}")
        return local_dir

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    return calls


def test_fetch_model_writes_marker_after_download(tmp_path, fake_hub):
    marker = tmp_path / "base.json"
    args = ["fetch-model", "--model-id", "1.5b", "--out-dir", str(tmp_path / "base"), "--marker", str(marker)]
    assert cli.main(args) == 0
    info = json.loads(marker.read_text())
    assert info["model_id"] == "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B"
    assert info["revision"] == "main" and info["commit"] == "f" * 40
    assert fake_hub == [("deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B", "f" * 40)]  # downloads the resolved sha


def test_fetch_model_without_config_json_writes_no_marker(tmp_path, fake_hub, capsys):
    marker = tmp_path / "m.json"
    args = ["fetch-model", "--model-id", "org/empty", "--revision", "v1"]
    assert cli.main([*args, "--out-dir", str(tmp_path / "m"), "--marker", str(marker)]) == 2
    assert "(no config.json)" in capsys.readouterr().err
    assert not marker.exists()


# --------------------------------------------------------------------------------------------------
# CHAMP, read offline from the champ-dataset package (located, never imported: it imports natsort)

needs_champ = pytest.mark.skipif(
    importlib.util.find_spec("champ_dataset") is None,
    reason="champ-dataset not installed (make setup installs it)",
)


@needs_champ
def test_champ_is_read_offline_from_its_package():
    spec = data.get_dataset("champ")
    records = data.normalise(spec, data.load_rows(spec))
    data.check_row_count(spec, records)
    assert records[0] == {
        "id": "champ-0000",
        "problem": "Let a string consist of digit 1, 2, 3. How many such strings of length 6 have adjacent "
        "digit differing by less than or equal to 1?",
        "answer": "239",
        "source": "package:champ_dataset/dataset_files/v0.json@1.0.0",
    }


def test_package_dataset_missing_is_a_clear_error():
    with pytest.raises(ConfigError, match="package 'no_such_pkg_xyz' is not installed"):
        package_file("no_such_pkg_xyz/file.json", "1.0")


@needs_champ
def test_package_dataset_of_another_version_is_a_clear_error():
    with pytest.raises(ConfigError, match=r"champ-dataset 1\.0\.0 installed, champ-dataset==9\.9 pinned"):
        package_file("champ_dataset/dataset_files/v0.json", "9.9")


# --------------------------------------------------------------------------------------------------
# A dataset of the user's, by options (config `datasets:` -> prepare-data --set)


def test_own_local_dataset_with_its_own_columns(tmp_path):
    source = tmp_path / "mine.jsonl"
    source.write_text('{"question": "1+1?", "gold": 2, "tags": [1.50]}\n{"question": "2+2?", "gold": "4"}\n')
    out = tmp_path / "data" / "mine.jsonl"
    args = ["prepare-data", "--dataset", "mine", "--out", str(out), "--set", f"path={source}"]
    assert cli.main([*args, "--set", "problem=question", "--set", "answer=gold"]) == 0
    records = data.load_records(out)
    file = f"file:{source}"
    assert records == [  # every column of the file kept under its own name, numbers as their text
        {"id": "mine-0000", "problem": "1+1?", "answer": "2", "source": file,
         "columns": {"question": "1+1?", "gold": "2", "tags": ["1.50"]}},
        {"id": "mine-0001", "problem": "2+2?", "answer": "4", "source": file,
         "columns": {"question": "2+2?", "gold": "4"}},
    ]  # fmt: skip
    manifest = json.loads(data.manifest_path(out).read_text())
    assert (manifest["rows"], manifest["display"], manifest["mirrors"]) == (2, "mine", None)


def test_own_dataset_names_its_label_and_mirror_in_its_manifest(tmp_path, capsys):
    source = tmp_path / "mine.jsonl"
    source.write_text('{"problem": "1+1?", "answer": 2}\n')
    out = tmp_path / "data" / "mine.jsonl"
    args = ["prepare-data", "--dataset", "mine", "--out", str(out), "--set", f"path={source}"]
    assert cli.main([*args, "--set", "display=My set", "--set", "mirrors=math500"]) == 0
    manifest = json.loads(data.manifest_path(out).read_text())
    assert (manifest["display"], manifest["mirrors"]) == ("My set", "math500")
    out.unlink()
    data.manifest_path(out).unlink()
    assert cli.main([*args, "--set", "mirrors=gsm8k"]) == 2
    assert "mirrors='gsm8k'; valid: aime24, math500" in capsys.readouterr().err
    assert not out.exists()


def test_own_dataset_column_that_does_not_exist_is_named(tmp_path, capsys):
    source = tmp_path / "mine.jsonl"
    source.write_text('{"question": "1+1?", "gold": 2}\n')
    args = [
        "prepare-data",
        "--dataset",
        "mine",
        "--out",
        str(tmp_path / "o.jsonl"),
        "--set",
        f"path={source}",
    ]
    assert cli.main([*args, "--set", "problem=question"]) == 2  # answer column defaults to `answer`
    err = capsys.readouterr().err
    assert "missing column 'answer'" in err and "['gold', 'question']" in err
    assert not (tmp_path / "o.jsonl").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of id"),
        ({"id": "org/data"}, "needs a revision"),
        ({"path": "no/such.jsonl"}, "file not found"),
        ({"path": "."}, "a folder, not a file: ."),
        ({"path": "x", "id": "org/data"}, "exactly one of id"),
    ],
)
def test_own_dataset_bad_options(options, message):
    with pytest.raises(ConfigError, match=message):
        prepare_data.OwnDataset(**options).spec("mine")


@pytest.mark.parametrize("name", ["my data", "café", "a-b", "x/y"])
def test_a_dataset_name_outside_the_pattern_says_so_at_parse_time_and_run_time(tmp_path, capsys, name):
    """Weak spot: the workflow called 'my data' unknown and then listed it among the known names, while
    prepare-data accepted it."""
    from cwgrpo_workflow.dag import preset_rules
    from cwgrpo_workflow.dag.preset_files import collect
    from tests.unit.dag_presets import preset

    config = preset("byo.yaml")
    config["datasets"][name] = config["datasets"].pop("my_train")
    config["data"]["train"] = name
    lines = collect([lambda: preset_rules.name_errors(config)])
    expected = f"dataset name {name!r} may hold only ASCII letters, digits and _ (the pattern [A-Za-z0-9_]+)"
    assert len(lines) == 1 and lines[0].startswith(f"datasets.{name}: {expected}")
    source = tmp_path / "mine.jsonl"
    source.write_text('{"problem": "p", "answer": "1"}\n')
    argv = ["prepare-data", "--dataset", name, "--set", f"path={source}", "--out", str(tmp_path / "o.jsonl")]
    assert cli.main(argv) == 2
    assert expected in capsys.readouterr().err and not (tmp_path / "o.jsonl").exists()


def test_gold_kinds_follow_the_released_configuration():
    """Each paper benchmark's spec carries the released gold kind; a stand-in takes its mirror's."""
    paper_kinds = [data.gold_kind_for(b) for b in ("aime24", "amc23", "math500", "minerva", "olympiadbench")]
    assert paper_kinds == ["expr", "expr", "latex", "latex", "latex"]
    assert data.gold_kind_for("own", "math500") == "latex"  # a user's stand-in, by its manifest's mirror
    assert [data.gold_kind_for(s.name) for s in synthetic.SPLITS.values() if s.mirrors] == [
        data.gold_kind_for(s.mirrors) for s in synthetic.SPLITS.values() if s.mirrors
    ]
    with pytest.raises(ConfigError, match="no gold kind"):
        data.gold_kind_for("gsm8k")
    with pytest.raises(ConfigError, match="no gold kind"):
        data.gold_kind_for("champ")  # registered, but no paper benchmark
