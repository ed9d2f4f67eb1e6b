"""A throwaway one-node Slurm cluster for tests/slurm: munged, slurmctld and slurmd owned by the test.

`start_cluster()` writes a minimal `slurm.conf` for this machine into a fresh folder under /tmp (one
CPU-only node named after `hostname -s`, all of its usable CPUs, a little less memory than it has, no
accounting), starts the three daemons in the foreground as child processes of the test, waits until
`sinfo` shows the node idle and returns a `SlurmCluster`. `SlurmCluster.stop()` cancels what is left in
the queue, stops the daemons by pid and deletes the folder. Nothing outside that folder is written: the
daemons use their own munge socket, free TCP ports and pid/state/spool/log paths inside it, so a Slurm
or munged already running on the machine is neither used nor disturbed.

Everything run against the cluster must use `SlurmCluster.env` (SLURM_CONF points at the temporary
slurm.conf; no SLURM_* variable of an enclosing job leaks in). Needs root (slurmd starts job steps as
their user) and the Debian packages `slurm-wlm` and `munge` (which create the `munge` user and
/etc/munge/munge.key). `unavailable_reason()` says why the cluster cannot be used here, or None.

By hand: `python tests/slurm/slurm_harness.py` starts a cluster, prints the SLURM_CONF/PATH to export,
and stops it on Ctrl-C.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("munge", "sbatch", "srun", "squeue", "sinfo", "scontrol", "scancel")
SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")  # daemons live here; a non-login PATH may lack them
MUNGE_KEY = Path("/etc/munge/munge.key")
PARTITION = "debug"


class SlurmStartError(RuntimeError):
    """The daemons were installed but the cluster did not come up (the message has their logs)."""


def _search_path() -> str:
    parts = os.environ.get("PATH", "").split(os.pathsep)
    return os.pathsep.join([*parts, *(d for d in SBIN if d not in parts)])


def which(name: str) -> str | None:
    return shutil.which(name, path=_search_path())


def unavailable_reason() -> str | None:
    """Why a cluster cannot be started on this machine (None if it can)."""
    if not sys.platform.startswith("linux"):
        return f"Slurm runs on Linux only (this is {sys.platform})"
    if os.geteuid() != 0:
        return "not root: slurmd must run as root to start jobs (run the test as root, e.g. in CI)"
    missing = [name for name in (*DAEMONS, *CLIENTS) if which(name) is None]
    if missing:
        return (
            f"not installed: {', '.join(missing)} "
            "(apt-get install --no-install-recommends slurm-wlm munge, as .ci/run does)"
        )
    try:
        pwd.getpwnam("munge")
    except KeyError:
        return "no 'munge' user (the munge package creates it)"
    if not MUNGE_KEY.is_file():
        return f"no {MUNGE_KEY} (the munge package creates it)"
    return None


def _free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _real_memory_mb() -> int:
    """Total memory in MB less 5% (at least 512 MB) for the system, as Slurm's RealMemory."""
    with open("/proc/meminfo") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    total = kb // 1024
    return total - max(512, total // 20)


def _cpus() -> int:
    return len(os.sched_getaffinity(0))


def node_name() -> str:
    return socket.gethostname().split(".")[0]


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path.name}: not written)"
    return "\n".join(text[-lines:])


@dataclass
class SlurmCluster:
    """A running cluster: its folder, slurm.conf, the environment to use and the daemon processes."""

    root: Path
    conf: Path
    env: dict[str, str]
    node: str
    cpus: int
    memory_mb: int
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def pids(self) -> dict[str, int]:
        return {name: proc.pid for name, proc in self.procs.items()}

    def run(self, *args: str, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess:
        """A Slurm client command (`sinfo`, `squeue`, ...) against this cluster."""
        return subprocess.run(
            [which(args[0]) or args[0], *args[1:]],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )

    def diagnostics(self) -> str:
        """The last lines of each daemon's log and whether it is still running (for failure messages)."""
        parts = []
        for name in DAEMONS:
            proc = self.procs.get(name)
            state = (
                "not started"
                if proc is None
                else ("running" if proc.poll() is None else f"exited {proc.returncode}")
            )
            parts.append(
                f"--- {name} ({state}), {self.root / 'log' / (name + '.log')}:\n"
                + _tail(self.root / "log" / f"{name}.log")
            )
        return "\n".join(parts)

    def jobs(self) -> dict[str, dict[str, str]]:
        """Every job slurmctld still knows (all of them: MinJobAge is an hour), as `scontrol show job -o` fields."""
        out = self.run("scontrol", "show", "job", "-o").stdout
        found = {}
        for line in out.splitlines():
            if not line.startswith("JobId="):
                continue
            fields = {}
            for item in line.split():
                key, sep, value = item.partition("=")
                if sep:
                    fields[key] = value
            found[fields["JobId"]] = fields
        return found

    def stop(self) -> None:
        """Cancel queued/running jobs, stop the daemons by pid (slurmd, slurmctld, munged), delete the folder."""
        if self.procs.get("slurmctld") and self.procs["slurmctld"].poll() is None:
            try:
                self.run("scancel", "--partition", PARTITION, timeout=15, check=False)
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    left = self.run("squeue", "-h", "-o", "%i", timeout=15, check=False).stdout.split()
                    if not left:
                        break
                    time.sleep(0.5)
            except (OSError, subprocess.SubprocessError):
                pass
        for name in reversed(DAEMONS):  # slurmd first, munged last
            proc = self.procs.get(name)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


def _write_conf(root: Path, node: str, cpus: int, memory_mb: int, ports: list[int]) -> Path:
    socket_path = root / "munge" / "munge.socket"
    conf = f"""\
# Written by tests/slurm/slurm_harness.py: a one-node, CPU-only, accounting-free test cluster.
ClusterName=cwgrpotest
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={ports[0]}
SlurmdPort={ports[1]}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket_path}
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
MailProg=/bin/true
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
# Finished jobs stay visible to squeue/scontrol for an hour: without accounting (no sacct) that is the only
# job history, and the Snakemake plugin's squeue status mode needs MinJobAge >= 3 x its first check delay.
MinJobAge=3600
ReturnToService=2
SchedulerType=sched/backfill
# Trust the node line below even where slurmd detects another topology (containers, cgroup-limited CPUs).
SlurmdParameters=config_overrides
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName={PARTITION} Nodes={node} Default=YES MaxTime=INFINITE State=UP
"""
    path = root / "slurm.conf"
    path.write_text(conf)
    return path


def _clean_env(conf: Path, bin_dir: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_", "SQUEUE_", "SINFO_", "SCONTROL_"))
    }
    env["SLURM_CONF"] = str(conf)
    env["PATH"] = os.pathsep.join([str(bin_dir), _search_path()])
    return env


def _srun_shim(bin_dir: Path, conf: Path) -> None:
    """An `srun` that sets SLURM_CONF, first on the PATH the jobs get.

    The Snakemake job-step plugin (snakemake-executor-plugin-slurm-jobstep) deletes every SLURM_* variable,
    SLURM_CONF included, before it runs `srun` inside the batch job; srun then looks for the default
    /etc/slurm/slurm.conf (or a configless slurmd) and fails with "Could not establish a configuration
    source". A real cluster keeps slurm.conf where srun finds it without the variable; this temporary one
    cannot, so the jobs' srun gets it back through this wrapper (PATH is not a SLURM_* variable).
    """
    real = which("srun")
    bin_dir.mkdir()
    shim = bin_dir / "srun"
    shim.write_text(f'#!/bin/sh\nSLURM_CONF={conf}\nexport SLURM_CONF\nexec {real} "$@"\n')
    shim.chmod(0o755)


def start_cluster(timeout: float = 90) -> SlurmCluster:
    """Start munged, slurmctld and slurmd; return once the node is idle (SlurmStartError if it is not)."""
    reason = unavailable_reason()
    if reason:
        raise SlurmStartError(reason)
    # Under /tmp, not pytest's 0700 tmp_path: the munge user must reach its socket, and a unix socket path
    # must stay under ~100 characters.
    root = Path(tempfile.mkdtemp(prefix="cwgrpo-slurm-", dir="/tmp" if os.path.isdir("/tmp") else None))
    root.chmod(0o755)
    for sub in ("state", "spool", "log", "run"):
        (root / sub).mkdir()
    munge_dir = root / "munge"
    munge_dir.mkdir(mode=0o755)
    shutil.chown(munge_dir, "munge", "munge")

    node, cpus, memory_mb = node_name(), _cpus(), _real_memory_mb()
    conf = _write_conf(root, node, cpus, memory_mb, _free_ports(2))
    _srun_shim(root / "bin", conf)
    cluster = SlurmCluster(root, conf, _clean_env(conf, root / "bin"), node, cpus, memory_mb)

    def spawn(name: str, args: list[str], **kwargs) -> None:
        log = open(root / "log" / f"{name}.log", "ab")  # noqa: SIM115  (the child keeps it)
        try:
            cluster.procs[name] = subprocess.Popen(
                [which(name), *args],
                env=cluster.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test reaches the daemons only through stop()
                **kwargs,
            )
        finally:
            log.close()

    try:
        # munged runs as the munge user (the owner of the key), as the packaged service does.
        spawn(
            "munged",
            [
                "--foreground",
                f"--socket={munge_dir / 'munge.socket'}",
                f"--pid-file={munge_dir / 'munged.pid'}",
                f"--seed-file={munge_dir / 'munged.seed'}",
                f"--log-file={root / 'log' / 'munged.log'}",
            ],
            user="munge",
            group="munge",
            extra_groups=[],
        )
        _wait(cluster, lambda: (munge_dir / "munge.socket").exists(), "munged socket", timeout=20)
        # -D: foreground (the pid is the daemon's); -i: ignore state files (there are none).
        spawn("slurmctld", ["-D", "-i", "-f", str(conf)])
        spawn("slurmd", ["-D", "-N", node, "-f", str(conf)])
        _wait(cluster, lambda: _node_state(cluster) == "idle", f"node {node} idle in sinfo", timeout=timeout)
    except Exception as err:
        diagnostics = cluster.diagnostics()
        cluster.stop()
        raise SlurmStartError(f"the test cluster did not come up ({err}):\n{diagnostics}") from None
    except BaseException:  # e.g. Ctrl-C: stop what was started, then let it through
        cluster.stop()
        raise
    return cluster


def _node_state(cluster: SlurmCluster) -> str | None:
    proc = cluster.run("sinfo", "-h", "-N", "-n", cluster.node, "-o", "%T", check=False, timeout=10)
    return proc.stdout.strip() if proc.returncode == 0 else None


def _wait(cluster: SlurmCluster, ready, what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        dead = [n for n, p in cluster.procs.items() if p.poll() is not None]
        if dead:
            raise SlurmStartError(f"{', '.join(dead)} exited while waiting for {what}")
        if ready():
            return
        time.sleep(0.5)
    raise SlurmStartError(f"timed out after {timeout:.0f} s waiting for {what}")


if __name__ == "__main__":
    c = start_cluster()
    print(f"export SLURM_CONF={c.conf} PATH={c.root / 'bin'}:$PATH   # pids: {c.pids}", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        c.stop()
