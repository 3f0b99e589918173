"""One writer per output folder (xdpx/io/writer_lock.py): a second x-train on a run directory, or a second
x-prepro on a data_dir, is refused while the first runs (exit 2, one line naming the holder, nothing
written); the lock goes however a run ends (done, error, exit 3); a lock a killed process left is taken
over; object-store folders are locked too."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from train_runs import REPO, train_config

from xdpx import io
from xdpx.io import writer_lock
from xdpx.io.writer_lock import LOCK_FILE, FolderLocked, WriterLock

PAUSED_RUN = REPO / "tests/reliability/paused_run.py"
HOST = socket.gethostname()


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def listing(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry of ``folder`` with its size and modification time: what a writer would change."""
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in folder.iterdir()}


def wait_for(path: Path, process: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None, process.communicate()[0]
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.05)


def test_a_second_x_train_is_refused_while_the_first_runs(reviews, tmp_path, cli):
    # as a requeued job racing the running one: the same command (resume: true) twice
    save_dir = tmp_path / "run"
    config = train_config(tmp_path / "t.hjson", reviews, save_dir, resume=True)
    ready, go = tmp_path / "ready", tmp_path / "go"
    first = subprocess.Popen([sys.executable, str(PAUSED_RUN), str(config), str(ready), str(go)], env=env(),
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(ready, first)  # the first run is inside its training loop, holding the lock
        before = listing(save_dir)
        assert json.loads((save_dir / LOCK_FILE).read_text())["pid"] == first.pid
        for flags in ((), ("--dry",)):
            code, out = cli("x-train", config, *flags)
            assert code == 2, out
            error = [line for line in out.splitlines() if "error" in line]
            assert error == [f"x-train: error: {config}: key 'save_dir': x-train refuses to write '{save_dir}': another "
                             f"run is writing it (x-train on host {HOST}, pid {first.pid}, since "
                             f"{error[0].split('since ')[1].split(')')[0]}). Wait for it to end, or stop it (kill "
                             f"{first.pid}), then run again: one writer per folder"], out
            assert time.strptime(error[0].split("since ")[1].split(")")[0], "%Y-%m-%d %H:%M:%S UTC")
            assert listing(save_dir) == before  # the refused command wrote nothing, not even a probe
        first.send_signal(signal.SIGUSR1)  # a preemption: the first run saves its state and exits 3
    finally:
        go.touch()
        out = first.communicate(timeout=120)[0]
    assert first.returncode == 3, out
    assert LOCK_FILE not in os.listdir(save_dir)  # released on the way out
    code, out = cli("x-train", config)  # the same command now continues the run, to its end
    assert code == 0, out
    assert "done: 6 updates" in out
    assert LOCK_FILE not in os.listdir(save_dir)


def test_a_failed_run_releases_its_lock(reviews, tmp_path, cli):
    save_dir = tmp_path / "run"
    config = train_config(tmp_path / "t.hjson", reviews, save_dir, learning_rate=1e20)  # the loss turns NaN
    code, out = cli("x-train", config)
    assert code == 1 and "the loss is nan at update" in out, out
    assert (save_dir / "args.py").is_file() and LOCK_FILE not in os.listdir(save_dir)


def test_the_lock_of_a_killed_run_is_taken_over(reviews, tmp_path, cli):
    from train_runs import KILL_RUNNER

    save_dir = tmp_path / "run"
    config = train_config(tmp_path / "t.hjson", reviews, save_dir, resume=True)
    killed = subprocess.run([sys.executable, str(KILL_RUNNER), str(config), "update", "2"], env=env(),
                            capture_output=True, timeout=120)
    assert killed.returncode == -9
    stale = json.loads((save_dir / LOCK_FILE).read_text())  # SIGKILL: no release
    assert stale["host"] == HOST and stale["command"] == "x-train"
    code, out = cli("x-train", config)
    assert code == 0, out
    assert f"took over the lock of x-train on host {HOST}, pid {stale['pid']}" in out
    assert "done: 6 updates" in out
    assert LOCK_FILE not in os.listdir(save_dir)


def write_record(folder: Path, **fields: object) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    record = {"command": "x-train", "host": HOST, "pid": os.getpid(), "process_start": None, "since": 0.0,
              "token": "t", **fields}
    (folder / LOCK_FILE).write_text(json.dumps(record))
    return folder / LOCK_FILE


def test_a_reused_pid_is_not_taken_for_the_holder(tmp_path):
    # the pid lives (it is this very process) but it started at another time: the holder is gone
    write_record(tmp_path / "run", process_start="00000000-1")
    lock = WriterLock(str(tmp_path / "run"), "x-train", "w")
    lock.acquire()
    assert lock.stale is not None and lock.stale["process_start"] == "00000000-1"
    assert json.loads((tmp_path / "run" / LOCK_FILE).read_text())["token"] == lock.token
    lock.release()
    assert os.listdir(tmp_path / "run") == []


def test_a_holder_on_another_host_is_named_with_how_to_remove_its_lock(tmp_path):
    path = write_record(tmp_path / "run", host="gpu-node-7", pid=4242, since=1795800000.0)
    lock = WriterLock(str(tmp_path / "run"), "x-train", "t.hjson: key 'save_dir': x-train refuses to write 'run'")
    with pytest.raises(FolderLocked) as refused:
        lock.acquire()
    assert str(refused.value) == (
        f"t.hjson: key 'save_dir': x-train refuses to write 'run': another run is writing it (x-train on host "
        f"gpu-node-7, pid 4242, since 2026-11-27 17:20:00 UTC); this is host {HOST}, so XDPX cannot tell whether "
        f"it still runs. Wait for it to end; if that job is really gone (killed, its node lost), remove the lock "
        f"(x-io rm {path}) and run again")
    assert json.loads(path.read_text())["pid"] == 4242  # untouched
    from xdpx.cli import x_io

    sys.argv = ["x-io", "rm", str(path)]
    with pytest.raises(SystemExit) as ended:
        x_io()
    assert ended.value.code in (0, None)
    lock.acquire()
    lock.release()


def test_an_object_store_folder_is_locked_and_its_stale_lock_taken_over(s3_root):
    folder = f"{s3_root}/runs/a"
    racers = [WriterLock(folder, "x-train", "w") for _ in range(4)]
    outcomes: list[str] = []

    def take(lock: WriterLock) -> None:
        try:
            lock.acquire()
            outcomes.append("held")
        except FolderLocked as refused:
            outcomes.append(str(refused))

    threads = [threading.Thread(target=take, args=(lock,)) for lock in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert outcomes.count("held") == 1, outcomes  # the conditional put lets exactly one writer in
    assert all(f"pid {os.getpid()}" in o for o in outcomes if o != "held")
    winner = next(lock for lock in racers if lock.token is not None)
    assert writer_lock.read_holder(f"{folder}/{LOCK_FILE}")["token"] == winner.token
    winner.release()
    assert not io.exists(f"{folder}/{LOCK_FILE}")
    # a record of a gone process of this host: taken over
    with io.open(f"{folder}/{LOCK_FILE}", "w") as f:
        json.dump({"command": "x-train", "host": HOST, "pid": 2**22 + 7, "since": 0.0, "token": "gone"}, f)
    lock = WriterLock(folder, "x-train", "w")
    lock.acquire()
    assert lock.stale is not None and lock.stale["token"] == "gone"
    lock.release()
    assert not io.exists(f"{folder}/{LOCK_FILE}")


HOLDER = """
import sys, time, os
from xdpx.io.writer_lock import WriterLock
lock = WriterLock(sys.argv[1], "x-prepro", "w")
lock.acquire()
open(sys.argv[2], "w").close()
while not os.path.exists(sys.argv[3]):
    time.sleep(0.05)
lock.release()
"""


def test_a_second_x_prepro_on_a_data_dir_is_refused(tmp_path, cli):
    data_dir = tmp_path / "data"
    config = tmp_path / "prepro.hjson"
    config.write_text(json.dumps({"__parent__": str(REPO / "examples/prepro/reviews_char"), "workers": 1,
                                  "data_source": str(REPO / "examples/data/sample/reviews"), "data_dir": str(data_dir)}))
    ready, go = tmp_path / "ready", tmp_path / "go"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(data_dir), str(ready), str(go)], env=env(),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        wait_for(ready, holder, 60)
        for flags in (("--dry",), ()):
            code, out = cli("x-prepro", config, *flags)
            assert code == 2, out
            assert (f"x-prepro: error: {config}: key 'data_dir': x-prepro refuses to write '{data_dir}': another run "
                    f"is writing it (x-prepro on host {HOST}, pid {holder.pid}, since ") in out
            assert f"Wait for it to end, or stop it (kill {holder.pid}), then run again" in out
            assert os.listdir(data_dir) == [LOCK_FILE]  # nothing written by the refused command
    finally:
        go.touch()
        holder.communicate(timeout=60)
    assert holder.returncode == 0
    code, out = cli("x-prepro", config)
    assert code == 0, out
    assert (data_dir / "meta.hjson").is_file() and LOCK_FILE not in os.listdir(data_dir)


def test_a_lock_left_behind_is_xdpx_s_own_file(reviews, tmp_path, cli):
    from xdpx.io.ownership import Output, check_outputs, file_owner

    # a killed x-prepro left only its lock: the folder is still free for x-prepro, and for x-train
    folder = tmp_path / "data"
    path = write_record(folder, command="x-prepro", pid=2**22 + 7)
    assert file_owner(str(path)) == "x-prepro"
    assert check_outputs("x-prepro", [Output("data_dir", str(folder), "folder")], [], lambda key: "c.hjson") == []
    code, out = cli("x-train", train_config(tmp_path / "t.hjson", reviews, folder), "--dry")
    assert code == 0, out
    # and no command may replace the lock file itself
    assert check_outputs("x-pred", [Output("predict_file_map", str(path))], [], lambda key: "p.hjson") == [
        f"p.hjson: key 'predict_file_map': x-pred refuses to write '{path}': x-prepro wrote it, not x-pred. "
        "Choose another path for predict_file_map"]
