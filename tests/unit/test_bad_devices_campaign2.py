"""GPU and port locks under hostile settings (issue 25): links, foreign folders, repeated devices, bad values."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.devices import gpu_pool, lease, one_gpu


def _refused(
    env: dict[str, str], match: str, n_gpus: int = 1, n_ports: int = 0, error: type = ConfigError
) -> None:
    with pytest.raises(error, match=match), lease(n_gpus, n_ports, env):
        pass


def _env(folder: Path, gpus: str = "0", **extra: str) -> dict[str, str]:
    return {"CWGRPO_LOCK_DIR": str(folder), "CUDA_VISIBLE_DEVICES": gpus, "PATH": os.environ["PATH"], **extra}


def test_a_lock_file_planted_as_a_link_is_not_followed(tmp_path):
    """Bug: gpu-0.lock as a symlink to a file of the user's, and one_gpu() truncated it."""
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "thesis.tex"
    victim.write_text("precious\n")
    (folder / "gpu-0.lock").symlink_to(victim)
    with pytest.raises(ConfigError, match=r"gpu-0\.lock"), one_gpu(_env(folder)):
        pass
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_lock_folder_others_can_write_is_refused(tmp_path, mode):
    folder = tmp_path / "locks"
    folder.mkdir()
    os.chmod(folder, mode)
    _refused(_env(folder), r"CWGRPO_LOCK_DIR.*only you own", 1, 0)
    _refused(_env(folder), "CWGRPO_LOCK_DIR", 0, 1)
    assert list(folder.iterdir()) == []


def test_a_lock_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(folder).st_uid + 1)  # as if another user made it
    _refused(_env(folder), "owned by uid", 1, 0)


def test_a_lock_folder_that_is_a_file_names_the_variable(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("x")
    _refused(_env(path), "CWGRPO_LOCK_DIR", 1, 0)
    assert path.read_text() == "x"


def test_a_device_listed_twice_is_an_error_not_a_wait_forever(tmp_path):
    """Bug: CUDA_VISIBLE_DEVICES=0,0 and lease(2, 0) waited forever with nothing else holding a GPU."""
    _refused(
        _env(tmp_path / "locks", "0,0", CWGRPO_GPU_WAIT_S="1"),
        r"CUDA_VISIBLE_DEVICES='0,0' names one GPU twice \(0;",
        2,
        0,
    )


@pytest.mark.parametrize("value", ["abc", "nan", "-5", "inf"])
def test_a_bad_wait_names_the_variable(tmp_path, value):
    _refused(_env(tmp_path / "locks", CWGRPO_GPU_WAIT_S=value), f"CWGRPO_GPU_WAIT_S={value!r}", 1, 0)


def test_minus_one_means_no_gpu_as_cuda_reads_it():
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "0,-1,1"}) == ["0"]  # CUDA stops at the first invalid id
    with one_gpu({"CUDA_VISIBLE_DEVICES": "-1"}) as gpu:
        assert gpu is None


def _fake_nvidia_smi(folder: Path) -> None:
    script = folder / "nvidia-smi"
    script.write_text(
        "#!/bin/sh\ncase \"$1\" in *uuid*) printf '0, GPU-aaaa\\n1, GPU-bbbb\\n';; *) printf '0\\n1\\n';; esac\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)


def test_one_gpu_spelled_as_index_and_uuid_is_not_handed_out_twice(tmp_path):
    with pytest.raises(ConfigError, match="mixes GPU indices and UUIDs"):
        gpu_pool({"CUDA_VISIBLE_DEVICES": "0,GPU-aaaa"})
    _fake_nvidia_smi(tmp_path)
    path = f"{tmp_path}:{os.environ['PATH']}"
    folder = tmp_path / "locks"
    with lease(1, 0, {**_env(folder, "0"), "PATH": path}) as first:  # one job gives the index
        assert first.gpus == ("0",)
        assert (folder / "gpu-GPU-aaaa.lock").is_file()
        # another gives the same GPU's UUID: it gets nothing (waits, here up to 0 s)
        _refused(
            {**_env(folder, "GPU-aaaa", CWGRPO_GPU_WAIT_S="0"), "PATH": path}, "not free", 1, 0, RuntimeError
        )
        with lease(1, 0, {**_env(folder, "GPU-bbbb"), "PATH": path}) as other:
            assert other.gpus == ("GPU-bbbb",)
