"""A one-node Slurm cluster for the tests: munged, slurmctld and slurmd started from a temp dir.

Nothing under /etc is read or written: munged gets its own key and socket, the daemons and the client
commands read the slurm.conf named by SLURM_CONF. The daemons run in the foreground as children of the
test process and are stopped by their PIDs. slurmd must run as root (it starts jobs as their user).
Without cgroups in a sandbox, the config uses proctrack/linuxproc and task/none (no cgroup plugins).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from xdpx.io.testing import free_port

TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "srun")


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def _memory_mb() -> int:
    with open("/proc/meminfo") as f:
        kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
    return int(kb / 1024 * 0.9)  # slurmd drains a node configured with more memory than it finds


SLURM_CONF = """\
ClusterName=xdpxtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={root}/run/munge.sock
SlurmUser=root
SlurmdUser=root
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool
SlurmctldPidFile={root}/run/slurmctld.pid
SlurmdPidFile={root}/run/slurmd.pid
PlugStackConfig={root}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=none
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
MinJobAge=600
NodeName=localhost NodeAddr=127.0.0.1 CPUs={cpus} RealMemory={memory_mb} State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class SlurmCluster:
    root: Path
    conf: Path
    processes: list[subprocess.Popen] = field(default_factory=list)
    logs: list[IO[str]] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def command(self, *args: str) -> str:
        result = subprocess.run(list(args), capture_output=True, text=True, env=self.env(), timeout=60)
        return result.stdout

    def job_state(self, job_id: str) -> dict[str, str]:
        """``scontrol show job`` as a dict (kept MinJobAge seconds after the end; no accounting needed)."""
        fields = self.command("scontrol", "show", "job", "-o", job_id).split()
        return dict(f.split("=", 1) for f in fields if "=" in f)

    def node_state(self) -> str:
        """The one node's State (IDLE, ALLOCATED, COMPLETING, IDLE+COMPLETING...)."""
        fields = self.command("scontrol", "show", "node", "-o").split()
        return dict(f.split("=", 1) for f in fields if "=" in f).get("State", "")

    def wait(self, job_id: str, timeout: float = 120) -> dict[str, str]:
        """Poll until the job has left the queue; its final state (JobState, ExitCode...)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.job_state(job_id)
            if state.get("JobState") not in (None, "PENDING", "CONFIGURING", "RUNNING", "COMPLETING"):
                return state
            time.sleep(0.5)
        subprocess.run(["scancel", job_id], env=self.env(), capture_output=True)
        raise TimeoutError(f"job {job_id} still {self.job_state(job_id).get('JobState')} after {timeout} s")

    def log(self) -> str:
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}"
                         for p in sorted(self.root.glob("*.log")))

    def stop(self) -> None:
        for process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        for log in self.logs:
            log.close()
        shutil.rmtree(self.root, ignore_errors=True)


def start_cluster(timeout: float = 30) -> SlurmCluster:
    # mkdtemp under /tmp, not pytest's tmp_path: munged requires every folder above its socket to be
    # executable by all (pytest's base folder is 0700), and the socket path must stay short.
    root = Path(tempfile.mkdtemp(prefix="xdpx-slurm-"))
    os.chmod(root, 0o711)
    for name in ("run", "state", "spool"):
        (root / name).mkdir()
    os.chmod(root / "run", 0o755)
    (root / "plugstack.conf").write_text("")  # not Debian's /etc/slurm/plugstack.conf
    conf = root / "slurm.conf"
    conf.write_text(SLURM_CONF.format(root=root, ctld_port=free_port(), slurmd_port=free_port(),
                                      cpus=os.cpu_count() or 1, memory_mb=_memory_mb()))
    cluster = SlurmCluster(root, conf)
    env = cluster.env()
    tool = lambda name: shutil.which(name) or name  # noqa: E731
    try:
        subprocess.run([tool("mungekey"), "--create", "--keyfile", str(root / "munge.key")], check=True,
                       capture_output=True, text=True)
        for command, log in (
            ([tool("munged"), "--foreground", "--force", f"--socket={root}/run/munge.sock",
              f"--key-file={root}/munge.key", f"--pid-file={root}/run/munged.pid",
              f"--seed-file={root}/munged.seed", f"--log-file={root}/munged.log"], "munged.out.log"),
            ([tool("slurmctld"), "-D", "-f", str(conf)], "slurmctld.log"),
            ([tool("slurmd"), "-D", "-N", "localhost", "-f", str(conf)], "slurmd.log"),
        ):
            out = open(root / log, "w")  # noqa: SIM115 (closed by stop, after the daemon)
            cluster.logs.append(out)
            cluster.processes.append(subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env,
                                                      start_new_session=True))
            if command[0].endswith("munged"):
                _wait_for(lambda: (root / "run" / "munge.sock").exists(), timeout, "munged", cluster)
        _wait_for(lambda: "idle" in cluster.command("sinfo", "-h", "-o", "%T"), timeout, "the node", cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster


def _wait_for(ready, timeout: float, what: str, cluster: SlurmCluster) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        for process in cluster.processes:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[0]} exited with {process.returncode}:\n{cluster.log()}")
        time.sleep(0.2)
    raise RuntimeError(f"{what} not ready after {timeout} s:\n{cluster.log()}")
