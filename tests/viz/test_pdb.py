"""xdpx.utils.pdb on a real terminal (a pty): worker processes sharing the debugger (set_nprocs), and
rank 0 of a torchrun job."""

from __future__ import annotations

import os
import pty
import re
import select
import sys
import time
from pathlib import Path

import pytest

WORKERS = """
import multiprocessing
from xdpx.utils import pdb

def work(i):
    secret = i * 10
    pdb.set_trace()
    print(f"worker {i} continued with {secret + 1}", flush=True)

if __name__ == "__main__":
    pdb.set_nprocs(2)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=work, args=(i,)) for i in (1, 2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print("exit codes", [w.exitcode for w in workers], flush=True)
"""

TORCHRUN = """
import torch.distributed as dist
from xdpx.utils import distributed_utils, pdb

dist.init_process_group("gloo")
secret = 100 + dist.get_rank()
if distributed_utils.is_master():
    pdb.set_trace()
dist.barrier()
print(f"rank {dist.get_rank()} done", flush=True)
dist.destroy_process_group()
"""


def prompts(output: str) -> set[str]:
    """The processes that showed a debugger prompt."""
    return set(re.findall(r"\(Pdb pid (\d+)\)", output))


class Terminal:
    """A program on a pseudo-terminal, driven like a user at the keyboard."""

    def __init__(self, argv: list[str]) -> None:
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: the pty is its controlling terminal
            os.execv(argv[0], argv)
        self.output = ""

    def expect(self, text: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.output:
            if time.monotonic() > deadline:
                raise AssertionError(f"{text!r} not seen; output so far:\n{self.output}")
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.output += os.read(self.fd, 4096).decode(errors="replace")
                except OSError:  # the program ended
                    break
        assert text in self.output, self.output
        return self.output

    def send(self, line: str) -> None:
        os.write(self.fd, (line + "\n").encode())

    def wait(self) -> int:
        _, status = os.waitpid(self.pid, 0)
        os.close(self.fd)
        return os.waitstatus_to_exitcode(status)


def test_worker_processes_share_one_debugger_session(tmp_path: Path):
    script = tmp_path / "workers.py"
    script.write_text(WORKERS)
    term = Terminal([sys.executable, str(script)])
    term.expect("(Pdb pid ")
    term.send("p secret")
    output = term.expect("0\r\n")
    # one process has the prompt; the other waits: no worker went on yet
    assert "continued with 1" not in term.output and "continued with 2" not in term.output
    assert len(prompts(term.output)) == 1
    debugged = 10 if "\n10\r\n" in term.output else 20
    term.send("c")
    term.expect("exit codes [0, 0]")
    assert term.wait() == 0
    assert "worker 1 continued with 11" in term.output and "worker 2 continued with 21" in term.output
    assert len(prompts(term.output)) == 1 and debugged in (10, 20), output


@pytest.mark.slow
def test_rank_zero_of_a_torchrun_job_gets_the_debugger(tmp_path: Path):
    script = tmp_path / "ranks.py"
    script.write_text(TORCHRUN)
    term = Terminal([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                     str(script)])
    term.expect("(Pdb pid ", timeout=120)
    term.send("p secret")
    term.expect("100\r\n")
    term.send("c")
    term.expect("rank 0 done")
    term.expect("rank 1 done")
    assert term.wait() == 0
    assert len(prompts(term.output)) == 1
