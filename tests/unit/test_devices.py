"""GPU and port leases (cwgrpo.launch.devices) and the launcher that uses them, with fake devices: no GPU here.

Devices are faked with CUDA_VISIBLE_DEVICES; `trl vllm-serve` is a stand-in script on PATH that answers
/health on the port it is given; the training command is replaced by a recorder.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cwgrpo.configs import ConfigError
from cwgrpo.launch.devices import claim_gpus, claim_ports, gpu_pool, lease, one_gpu, port_range


def _env(tmp_path: Path, gpus: str | None = "0,1,2,3,4,5,6,7", **extra: str) -> dict[str, str]:
    env = {"CWGRPO_LOCK_DIR": str(tmp_path / "locks"), "PATH": os.environ["PATH"], **extra}
    if gpus is not None:
        env["CUDA_VISIBLE_DEVICES"] = gpus
    return env


def test_gpu_pool_reads_cuda_visible_devices_and_needs_nvidia_smi_otherwise(tmp_path):
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert gpu_pool({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert gpu_pool({"PATH": str(tmp_path)}) == []  # no nvidia-smi: a CPU machine


def test_two_leases_get_disjoint_gpus_and_ports_and_a_third_cannot_oversubscribe(tmp_path):
    env = _env(tmp_path)
    with lease(4, 3, env) as a, lease(4, 3, env) as b:
        assert sorted(a.gpus + b.gpus) == [str(i) for i in range(8)]
        assert len(set(a.ports + b.ports)) == 6
        with (
            pytest.raises(RuntimeError, match="not free within 0 s"),
            lease(1, 0, {**env, "CWGRPO_GPU_WAIT_S": "0"}),
        ):
            pass
    with lease(8, 0, env) as c:  # released on exit
        assert len(c.gpus) == 8


def test_more_gpus_than_the_box_has_fails_at_once_naming_the_counts(tmp_path):
    with pytest.raises(ConfigError, match="needs 5 GPUs, but 4 are visible"):
        claim_gpus(5, ["0", "1", "2", "3"], tmp_path)


def test_a_killed_job_leaves_no_gpu_claimed(tmp_path):
    env = _env(tmp_path, gpus="0")
    code = "import sys, time; from cwgrpo.launch.devices import lease\nwith lease(1, 0):\n    print('held', flush=True); time.sleep(60)"
    holder = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(RuntimeError, match="not free"):
            claim_gpus(1, ["0"], tmp_path / "locks", wait_s=0)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    assert [g for g, _ in claim_gpus(1, ["0"], tmp_path / "locks", wait_s=0)] == ["0"]


def test_ports_skip_one_in_use_and_an_exhausted_range_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("", 0))
        busy.listen()
        port = busy.getsockname()[1]
        assert [p for p, _ in claim_ports(1, tmp_path, port, port + 1)] == [port + 1]
        with pytest.raises(ConfigError, match=f"no 1 free ports in {port}-{port}"):
            claim_ports(1, tmp_path, port, port)
    with pytest.raises(ConfigError, match="CWGRPO_PORT_RANGE='80-90'"):
        port_range({"CWGRPO_PORT_RANGE": "80-90"})


FAKE_TRL = """#!{python}
# Stand-in for `trl vllm-serve --model M --port P`: records its GPU and port, answers /health until stopped.
import http.server, json, os, sys
port = int(sys.argv[sys.argv.index("--port") + 1])
with open(os.environ["RECORD_DIR"] + f"/server-{{port}}.json", "w") as f:
    json.dump({{"gpus": os.environ["CUDA_VISIBLE_DEVICES"], "port": port, "pid": os.getpid()}}, f)
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.end_headers()
    def log_message(self, *args):
        pass
http.server.HTTPServer(("127.0.0.1", port), Health).serve_forever()
"""

JOB = """
# One paper-shaped training job (3 training GPUs + 1 vLLM GPU) whose training command only records.
import json, os, sys, time
import cwgrpo.launch.launcher as launch
from cwgrpo.train.options import TrainJob

real_plan = launch.plan
RECORD = (
    "import json, os, sys, time; start = time.time(); time.sleep(1.5); "
    "json.dump({'gpus': os.environ['CUDA_VISIBLE_DEVICES'], 'argv': sys.argv[2:], 'start': start, "
    "'end': time.time(), 'server_port': os.environ['CWGRPO_VLLM_SERVER_PORT'], "
    "'group_port': os.environ['CWGRPO_VLLM_GROUP_PORT']}, open(sys.argv[1], 'w'))"
)

def plan(*args, **kwargs):
    server, server_env, train, train_env = real_plan(*args, **kwargs)
    return server, server_env, [sys.executable, "-c", RECORD, sys.argv[1], *train], train_env

launch.plan = plan
job = TrainJob(launcher="accelerate", num_processes=3, vllm_server_gpu=3)
sys.exit(launch.relaunch(["train", "--model-dir", "m", "--train-data", "d", "--run-dir", "r"], job, "m"))
"""


def test_two_concurrent_training_jobs_get_distinct_devices_and_ports(tmp_path):
    """Two paper-shaped jobs started together on a fake 8-GPU box: each server and each trainer sees only
    its own GPUs, each server listens on its own port, and each trainer is told its own server's port."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    trl = bin_dir / "trl"
    trl.write_text(FAKE_TRL.format(python=sys.executable))
    trl.chmod(0o755)
    job = tmp_path / "job.py"
    job.write_text(textwrap.dedent(JOB))
    env = {
        **os.environ,
        **_env(tmp_path),
        "RECORD_DIR": str(tmp_path),
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
    }
    procs = [
        subprocess.Popen([sys.executable, str(job), str(tmp_path / f"train-{i}.json")], env=env)
        for i in (0, 1)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]

    trainers = [json.loads((tmp_path / f"train-{i}.json").read_text()) for i in (0, 1)]
    servers = {s["port"]: s for s in (json.loads(p.read_text()) for p in tmp_path.glob("server-*.json"))}
    assert (
        trainers[0]["start"] < trainers[1]["end"] and trainers[1]["start"] < trainers[0]["end"]
    )  # concurrent
    devices = []
    for t in trainers:
        server = servers[int(t["server_port"])]
        devices += [*t["gpus"].split(","), server["gpus"]]
        argv = t["argv"]
        assert argv[argv.index("--num_processes") + 1] == "3"
        t["main_port"] = int(argv[argv.index("--main_process_port") + 1])
    assert sorted(devices) == [str(i) for i in range(8)]  # 2 jobs x (3 + 1) GPUs, none shared
    ports = [int(p) for t in trainers for p in (t["server_port"], t["group_port"], t["main_port"])]
    assert len(set(ports)) == 6 and len(servers) == 2
    for server in servers.values():  # the launchers stopped (and reaped) their servers
        with pytest.raises(ProcessLookupError):
            os.kill(server["pid"], 0)


def test_one_gpu_narrows_cuda_visible_devices_to_a_device_of_its_own(tmp_path):
    env_a, env_b = _env(tmp_path, gpus="3,5"), _env(tmp_path, gpus="3,5")
    with one_gpu(env_a) as a, one_gpu(env_b) as b:
        assert (
            {a, b} == {"3", "5"} and env_a["CUDA_VISIBLE_DEVICES"] == a and env_b["CUDA_VISIBLE_DEVICES"] == b
        )
    assert env_a["CUDA_VISIBLE_DEVICES"] == "3,5"  # restored
    cpu = _env(tmp_path, gpus="")
    with one_gpu(cpu) as none:
        assert none is None and cpu["CUDA_VISIBLE_DEVICES"] == ""


def test_a_child_given_the_lock_descriptors_keeps_the_claim_after_its_parent_dies(tmp_path):
    """The launcher passes its locks to the server and trainers: killing the launcher alone frees nothing."""
    env = _env(tmp_path, gpus="0")
    code = textwrap.dedent("""
        import os, subprocess, sys
        from cwgrpo.launch.devices import lease
        with lease(1, 0) as held:
            child = subprocess.Popen(
                [sys.executable, "-c", "import time; time.sleep(60)"],
                pass_fds=held.fds(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            print(child.pid, flush=True)
            os._exit(9)  # the launcher dies; its child runs on
    """)
    parent = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    child = int(parent.stdout.split()[0])
    try:
        with pytest.raises(RuntimeError, match="not free"):
            claim_gpus(1, ["0"], tmp_path / "locks", wait_s=0)
    finally:
        os.kill(child, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while True:  # the child is not ours to reap: wait until it is gone
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert [g for g, _ in claim_gpus(1, ["0"], tmp_path / "locks", wait_s=0)] == ["0"]


def test_device_locks_are_per_slurm_allocation(tmp_path):
    """Two allocations on one node both number their single GPU 0: neither blocks the other; two jobs of
    one allocation (a Snakemake run inside salloc) do not share its device."""
    one, other = _env(tmp_path, gpus="0", SLURM_JOB_ID="101"), _env(tmp_path, gpus="0", SLURM_JOB_ID="102")
    with lease(1, 1, one) as a, lease(1, 1, other) as b:
        assert a.gpus == b.gpus == ("0",) and a.ports != b.ports
        with pytest.raises(RuntimeError, match="not free"), lease(1, 0, {**one, "CWGRPO_GPU_WAIT_S": "0"}):
            pass


def test_a_lock_folder_planted_as_a_link_to_an_own_folder_is_refused(tmp_path):
    """The default folder (or CWGRPO_LOCK_DIR) as a link to a folder this user owns: refused as a link,
    and the lock files in the folder it points to are left as they are."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (real / "gpu-0.lock").write_text("precious\n")
    (tmp_path / "locks").symlink_to(real)
    for n_gpus, n_ports in ((1, 0), (0, 1)):
        with (
            pytest.raises(ConfigError, match=r"lock folder .*locks .*is a symbolic link"),
            lease(n_gpus, n_ports, _env(tmp_path, "0")),
        ):
            pass  # fmt: skip
    assert (real / "gpu-0.lock").read_text() == "precious\n"
    assert [p.name for p in real.iterdir()] == ["gpu-0.lock"]


@pytest.mark.parametrize(
    "value, named",
    [
        ("0,00", "(0;"),
        ("1, 01", "(1;"),
        ("GPU-AAAA-1111,gpu-aaaa-1111", "(GPU-aaaa-1111;"),
        ("GPU-aaaa-1111,GPU-aaaa", "(GPU-aaaa-1111 and GPU-aaaa;"),
    ],
)
def test_one_device_named_twice_as_cuda_reads_it_is_refused(value, named):
    """CUDA reads ``00`` as ``0``, UUIDs regardless of case, and a unique UUID prefix as that GPU."""
    with pytest.raises(ConfigError, match=rf"CUDA_VISIBLE_DEVICES={value!r} names one GPU twice \{named}"):
        gpu_pool({"CUDA_VISIBLE_DEVICES": value})


@pytest.mark.parametrize("first, second", [("0", "00"), ("GPU-aaaa-1111", "gpu-AAAA-1111")])
def test_two_jobs_given_one_device_in_two_spellings_never_share_it(tmp_path, first, second):
    with lease(1, 0, _env(tmp_path, first)) as held:
        assert held.gpus == (first,)
        with (
            pytest.raises(RuntimeError, match="not free"),
            lease(1, 0, _env(tmp_path, second, CWGRPO_GPU_WAIT_S="0")),
        ):
            pass  # fmt: skip


def test_a_uuid_prefix_locks_the_gpu_it_names():
    from cwgrpo.launch.devices import device_lock_ids

    uuids = {"0": "GPU-aaaa-1111", "1": "GPU-bbbb-2222"}
    pool = gpu_pool({"CUDA_VISIBLE_DEVICES": "GPU-AAAA,GPU-BBBB"})
    assert device_lock_ids(pool, uuids) == {"GPU-aaaa": "GPU-aaaa-1111", "GPU-bbbb": "GPU-bbbb-2222"}
    assert device_lock_ids(["GPU-"], uuids) == {"GPU-": "GPU-"}  # not unique: CUDA would not take it


# -- hostile settings: lock files as links, foreign lock folders, devices listed twice, bad values -------


def _refused(
    env: dict[str, str], match: str, n_gpus: int = 1, n_ports: int = 0, error: type = ConfigError
) -> None:
    with pytest.raises(error, match=match), lease(n_gpus, n_ports, env):
        pass


def _lock_env(folder: Path, gpus: str = "0", **extra: str) -> dict[str, str]:
    return {"CWGRPO_LOCK_DIR": str(folder), "CUDA_VISIBLE_DEVICES": gpus, "PATH": os.environ["PATH"], **extra}


def test_a_lock_file_planted_as_a_link_is_not_followed(tmp_path):
    """Bug: gpu-0.lock as a symlink to a file of the user's, and one_gpu() truncated it."""
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    victim = tmp_path / "thesis.tex"
    victim.write_text("precious\n")
    (folder / "gpu-0.lock").symlink_to(victim)
    with pytest.raises(ConfigError, match=r"gpu-0\.lock"), one_gpu(_lock_env(folder)):
        pass
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o1777])
def test_a_lock_folder_others_can_write_is_refused(tmp_path, mode):
    folder = tmp_path / "locks"
    folder.mkdir()
    os.chmod(folder, mode)
    _refused(_lock_env(folder), r"CWGRPO_LOCK_DIR.*only you own", 1, 0)
    _refused(_lock_env(folder), "CWGRPO_LOCK_DIR", 0, 1)
    assert list(folder.iterdir()) == []


def test_a_lock_folder_of_another_user_is_refused(tmp_path, monkeypatch):
    folder = tmp_path / "locks"
    folder.mkdir(mode=0o700)
    monkeypatch.setattr(os, "getuid", lambda: os.stat(folder).st_uid + 1)  # as if another user made it
    _refused(_lock_env(folder), "owned by uid", 1, 0)


def test_a_lock_folder_that_is_a_file_names_the_variable(tmp_path):
    path = tmp_path / "a-file"
    path.write_text("x")
    _refused(_lock_env(path), "CWGRPO_LOCK_DIR", 1, 0)
    assert path.read_text() == "x"


def test_a_device_listed_twice_is_an_error_not_a_wait_forever(tmp_path):
    """Bug: CUDA_VISIBLE_DEVICES=0,0 and lease(2, 0) waited forever with nothing else holding a GPU."""
    _refused(
        _lock_env(tmp_path / "locks", "0,0", CWGRPO_GPU_WAIT_S="1"),
        r"CUDA_VISIBLE_DEVICES='0,0' names one GPU twice \(0;",
        2,
        0,
    )


@pytest.mark.parametrize("value", ["abc", "nan", "-5", "inf"])
def test_a_bad_wait_names_the_variable(tmp_path, value):
    _refused(_lock_env(tmp_path / "locks", CWGRPO_GPU_WAIT_S=value), f"CWGRPO_GPU_WAIT_S={value!r}", 1, 0)


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
    with lease(1, 0, {**_lock_env(folder, "0"), "PATH": path}) as first:  # one job gives the index
        assert first.gpus == ("0",)
        assert (folder / "gpu-GPU-aaaa.lock").is_file()
        # another gives the same GPU's UUID: it gets nothing (waits, here up to 0 s)
        _refused(
            {**_lock_env(folder, "GPU-aaaa", CWGRPO_GPU_WAIT_S="0"), "PATH": path},
            "not free",
            1,
            0,
            RuntimeError,
        )
        with lease(1, 0, {**_lock_env(folder, "GPU-bbbb"), "PATH": path}) as other:
            assert other.gpus == ("GPU-bbbb",)


@pytest.mark.skipif(os.getuid() != 0, reason="plants another user's link with lchown (root only)")
def test_a_lock_folder_under_a_link_another_user_planted_is_refused(tmp_path):
    """Weak spot: TMPDIR as a link another user planted, and only the lock folder itself was checked."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    planted = tmp_path / "tmp"
    planted.symlink_to(theirs)
    os.lchown(planted, 4242, 4242)
    _refused(_lock_env(planted / "cwgrpo-locks"), r"tmp is a link owned by uid 4242", 1, 0)
    assert list(theirs.iterdir()) == []
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    os.chmod(open_to_all, 0o777)
    _refused(
        _lock_env(open_to_all / "locks"), r"anyone can write .*open \(mode drwxrwxrwx, no sticky bit\)", 0, 1
    )
    sticky = tmp_path / "sticky"
    sticky.mkdir()
    os.chmod(sticky, 0o1777)  # as /tmp: others can write, but not swap what this user made
    with one_gpu(_lock_env(sticky / "locks")):
        pass


@pytest.mark.skipif(os.getuid() != 0, reason="makes another user's folder with chown (root only)")
def test_a_lock_folder_inside_another_users_folder_is_refused_even_through_an_own_link(tmp_path):
    """Campaign #57: another user's folder (not world-writable) held the lock folder; the owner could swap
    it. Refused, also when reached through a link of this user's."""
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    os.chown(theirs, 4242, 4242)
    _refused(_lock_env(theirs / "locks"), r"theirs is a folder owned by uid 4242", 1, 0)
    mine = tmp_path / "mylink"
    mine.symlink_to(theirs)
    _refused(_lock_env(mine / "locks"), r"theirs is a folder owned by uid 4242", 1, 0)
    assert list(theirs.iterdir()) == []
