"""A throwaway single-node Slurm (munged, slurmctld, slurmd) in a temporary directory."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Debian 12's Slurm 22.05 has no auth/slurm, so munge authenticates the daemons and clients.
PACKAGES = ("slurmctld", "slurmd", "slurm-client", "munge")
DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("sbatch", "squeue", "scontrol", "scancel", "sinfo")
# Debian puts the daemons in /usr/sbin, which a non-login root shell may lack on PATH.
SEARCH_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
# The major number Linux gives the real devices: Slurm's gres code accepts character devices only.
GPU_MAJOR = 195
# Set by CI: where the cluster must come up, a reason to skip is a failure.
REQUIRED_ENV = "ZL_SLURM_REQUIRED"


@dataclass(frozen=True)
class Spec:
    """What the node declares and where every file of the cluster lives."""

    root: Path
    host: str
    ctld_port: int
    slurmd_port: int
    cpus: int = 8
    gpus: int = 4
    partition: str = "debug"

    def __post_init__(self) -> None:
        if self.cpus < 1 or self.gpus < 1:
            raise ValueError(f"a node needs a CPU and a GPU; got cpus={self.cpus!r}, "
                             f"gpus={self.gpus!r}")

    def path(self, name: str) -> Path:
        return self.root / name

    @property
    def conf(self) -> Path:
        return self.path("etc/slurm.conf")

    @property
    def munge_socket(self) -> Path:
        return self.path("munge/munge.socket")

    @property
    def jobcomp(self) -> Path:
        return self.path("log/jobcomp.txt")

    def gpu_devices(self) -> list[Path]:
        return [self.path(f"dev/nvidia{i}") for i in range(self.gpus)]


def slurm_conf(spec: Spec) -> str:
    """slurm.conf for one node that runs jobs side by side on cores, with fake GPUs as gres."""
    p = spec.path
    lines = [
        "ClusterName=harness-test",
        f"SlurmctldHost={spec.host}(127.0.0.1)",
        f"SlurmctldPort={spec.ctld_port}",
        f"SlurmdPort={spec.slurmd_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={spec.munge_socket}",
        f"StateSaveLocation={p('state')}",
        f"SlurmdSpoolDir={p('spool')}",
        f"SlurmctldPidFile={p('run/slurmctld.pid')}",
        f"SlurmdPidFile={p('run/slurmd.pid')}",
        f"SlurmctldLogFile={p('log/slurmctld.log')}",
        f"SlurmdLogFile={p('log/slurmd.log')}",
        # No systemd, so no cgroup: processes are tracked through /proc and tasks are not bound.
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/filetxt",
        f"JobCompLoc={spec.jobcomp}",
        # Without CR_Core the node is allocated whole and the jobs of an array run one at a time.
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        # The node may declare more CPUs than the machine has.
        "SlurmdParameters=config_overrides",
        "ReturnToService=2",
        "MpiDefault=none",
        "GresTypes=gpu",
        "SchedulerType=sched/backfill",
        "SchedulerParameters=sched_interval=1",
        "MinJobAge=600",
        "SlurmdTimeout=30",
        "InactiveLimit=0",
        "KillWait=2",
        f"NodeName={spec.host} NodeAddr=127.0.0.1 CPUs={spec.cpus} Gres=gpu:{spec.gpus} "
        "State=UNKNOWN",
        f"PartitionName={spec.partition} Nodes={spec.host} Default=YES MaxTime=INFINITE State=UP",
    ]
    return "\n".join(lines) + "\n"


def gres_conf(spec: Spec) -> str:
    """gres.conf naming each fake device file; autodetection would find none and override it."""
    first, last = spec.gpu_devices()[0], spec.gpu_devices()[-1]
    files = str(first) if spec.gpus == 1 else f"{str(first)[:-1]}[0-{spec.gpus - 1}]"
    assert last.name == f"nvidia{spec.gpus - 1}"
    return f"AutoDetect=off\nNodeName={spec.host} Name=gpu File={files}\n"


def munged_argv(spec: Spec) -> list[str]:
    p = spec.path
    return ["munged", "--foreground", "--force", f"--socket={spec.munge_socket}",
            f"--key-file={p('munge/munge.key')}", f"--pid-file={p('run/munged.pid')}",
            f"--log-file={p('log/munged.log')}", f"--seed-file={p('munge/munged.seed')}"]


def daemon_argv(spec: Spec) -> list[list[str]]:
    """The command lines of the three daemons, in the order they must start."""
    return [munged_argv(spec), ["slurmctld", "-D", "-f", str(spec.conf)],
            ["slurmd", "-D", "-f", str(spec.conf), "-N", spec.host]]


def missing_programs(which: Callable[[str], str | None] | None = None) -> list[str]:
    """The daemons and clients the cluster needs that are not on PATH (nor in /usr/sbin)."""
    which = which or (lambda name: shutil.which(name, path=SEARCH_PATH))
    return [name for name in (*DAEMONS, *CLIENTS) if which(name) is None]


def skip_reason(euid: int, missing: Sequence[str], install_error: str | None) -> str | None:
    """Why the cluster cannot be brought up here, or None when it can.

    Starting the daemons and making the device nodes needs root; the packages are installed
    first where programs are missing, and `install_error` says why that failed.
    """
    if euid != 0:
        return "the Slurm tests need root: they install packages, mknod devices and start daemons"
    if missing and install_error:
        return f"Slurm is not installed ({', '.join(missing)} missing) and {install_error}"
    if missing:
        return f"Slurm is not installed: {', '.join(missing)} missing"
    return None


def install_packages(run: Callable[..., subprocess.CompletedProcess] = subprocess.run
                     ) -> str | None:
    """Install the Slurm and munge packages with apt-get; None on success, else why not."""
    if shutil.which("apt-get") is None:
        return "apt-get is not available to install them"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update"],
                 ["apt-get", "install", "-y", "--no-install-recommends", *PACKAGES]):
        done = run(argv, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:]
            return f"`{' '.join(argv)}` failed (exit {done.returncode}): {' '.join(tail)}"
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_taken(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("0.0.0.0", port))
        except OSError:
            return True
        return False


@dataclass
class Cluster:
    """A running cluster: its spec, the daemons it started, and the environment of its clients."""

    spec: Spec
    procs: list[subprocess.Popen] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        """os.environ with SLURM_CONF pointing at this cluster and the Slurm programs on PATH."""
        return {**os.environ, "SLURM_CONF": str(self.spec.conf), "PATH": SEARCH_PATH}

    def run(self, *argv: str, check: bool = True, timeout: float = 60
            ) -> subprocess.CompletedProcess:
        """Run a Slurm client against this cluster; raise with its output when `check` fails."""
        done = subprocess.run(list(argv), env=self.env, capture_output=True, text=True,
                              timeout=timeout)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: "
                               f"{done.stderr.strip() or done.stdout.strip()}\n{self.logs()}")
        return done

    def logs(self, lines: int = 15) -> str:
        """The last lines of each daemon's log, for a failure message."""
        parts = []
        for name in ("munged", "slurmctld", "slurmd"):
            log = self.spec.path(f"log/{name}.log")
            text = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else []
            parts.append(f"--- {name}.log\n" + "\n".join(text))
        return "\n".join(parts)

    def node_state(self) -> str:
        done = self.run("sinfo", "-h", "-N", "-o", "%T", check=False, timeout=10)
        return done.stdout.strip() if done.returncode == 0 else ""

    def cancel_all(self, timeout: float = 20) -> None:
        """Cancel every job still queued or running and wait until squeue lists none.

        A running job's slurmstepd outlives slurmd, so jobs go before the daemons do.
        """
        listed = self.run("squeue", "-h", "-o", "%A", check=False, timeout=10)
        ids = listed.stdout.split() if listed.returncode == 0 else []
        if not ids:
            return
        self.run("scancel", *ids, check=False, timeout=10)
        deadline = time.monotonic() + timeout
        while self.run("squeue", "-h", "-o", "%A", check=False, timeout=10).stdout.split():
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)

    def stop(self, timeout: float = 20) -> None:
        """Cancel the jobs left, stop every daemon this cluster started (by its PID, not by
        name: another cluster may be running), and wait until its ports are free."""
        if self.procs and all(p.poll() is None for p in self.procs):
            self.cancel_all()
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + timeout
        for proc in reversed(self.procs):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs.clear()
        ports = (self.spec.ctld_port, self.spec.slurmd_port)
        while any(port_taken(p) for p in ports) and time.monotonic() < deadline:
            time.sleep(0.1)


def write_files(spec: Spec) -> None:
    """Create the cluster's directories, configuration, munge key and fake device nodes."""
    for name in ("etc", "state", "spool", "run", "log", "dev"):
        spec.path(name).mkdir(parents=True, exist_ok=True)
    # munged refuses a socket directory that others may write to, and clients need to reach it.
    spec.path("munge").mkdir(mode=0o755, exist_ok=True)
    spec.path("munge").chmod(0o755)
    key = spec.path("munge/munge.key")
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    spec.conf.write_text(slurm_conf(spec))
    spec.path("etc/gres.conf").write_text(gres_conf(spec))
    for index, dev in enumerate(spec.gpu_devices()):
        # Slurm rejects plain files as gres devices; these nodes are never opened.
        os.mknod(dev, 0o600 | stat.S_IFCHR, os.makedev(GPU_MAJOR, index))


def start(root: Path, timeout: float = 60, **declared: int) -> Cluster:
    """Bring up a cluster under `root` and wait until its node is idle; stop it on failure."""
    ctld_port = free_port()
    while (slurmd_port := free_port()) == ctld_port:
        pass
    spec = Spec(root=root, host=socket.gethostname().split(".")[0], ctld_port=ctld_port,
                slurmd_port=slurmd_port, **declared)
    write_files(spec)
    cluster = Cluster(spec)
    try:
        for argv in daemon_argv(spec):
            log = spec.path(f"log/{argv[0]}.out").open("wb")
            cluster.procs.append(subprocess.Popen(
                argv, env=cluster.env, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, start_new_session=True))
            if argv[0] == "munged":
                wait_until(spec.munge_socket.exists, timeout, "munged's socket", cluster)
        wait_until(lambda: cluster.node_state() == "idle", timeout, "the node to be idle", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def wait_until(predicate: Callable[[], bool], timeout: float, what: str,
               cluster: Cluster | None = None, poll: float = 0.2) -> None:
    """Poll `predicate`; raise naming `what` (with the daemons' logs) after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        dead = [p.args[0] for p in (cluster.procs if cluster else []) if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            why = f"{', '.join(dead)} exited" if dead else f"{timeout:g} s passed"
            raise RuntimeError(f"waiting for {what}: {why}\n"
                               + (cluster.logs() if cluster else ""))
        time.sleep(poll)


def unavailable(install: Callable[[], str | None] = install_packages) -> str | None:
    """Why no cluster can come up here, after installing the packages where they are missing."""
    euid = os.geteuid()
    if euid != 0:
        return skip_reason(euid, [], None)
    missing = missing_programs()
    error = install() if missing else None
    return skip_reason(euid, missing_programs() if missing else [], error)


def required(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether REQUIRED_ENV turns a reason to skip into a failure; ValueError on a bad value."""
    value = environ.get(REQUIRED_ENV, "")
    if value not in ("", "0", "1"):
        raise ValueError(f"error: {REQUIRED_ENV}={value!r} is not one of '0', '1'")
    return value == "1"
