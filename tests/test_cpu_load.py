"""OpenMP's wait policy chosen from the load (xdpx/utils/cpu_load.py): PASSIVE only on busy cores, never over
the user's choice, and set by the dispatcher before torch is imported (else OpenMP never reads it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from xdpx.utils.cpu_load import choose_wait_policy, usable_cores

REPO = Path(__file__).resolve().parents[1]


def choose(environ: dict[str, str], cores: int, load: float) -> str | None:
    """choose_wait_policy as a fresh process runs it (torch not imported yet), with a given load."""
    code = ("import json, sys; from xdpx.utils.cpu_load import choose_wait_policy; env = json.loads(sys.argv[1]); "
            "note = choose_wait_policy(env, int(sys.argv[2]), float(sys.argv[3])); print(json.dumps([note, env]))")
    out = subprocess.run([sys.executable, "-c", code, json.dumps(environ), str(cores), str(load)],
                         capture_output=True, text=True, check=True).stdout
    note, after = json.loads(out)
    environ.clear()
    environ.update(after)
    return note


def test_busy_cores_make_waiting_threads_sleep() -> None:
    env: dict[str, str] = {}
    note = choose(env, cores=2, load=11.8)
    assert env == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert note is not None and note.startswith("load average 11.8 on 2 usable core(s)")


def test_idle_cores_keep_openmps_default() -> None:
    env: dict[str, str] = {}
    assert choose(env, cores=2, load=1.9) is None
    assert env == {}


def test_the_users_setting_wins() -> None:
    for name, value in [("OMP_WAIT_POLICY", "ACTIVE"), ("GOMP_SPINCOUNT", "300000")]:
        env = {name: value}
        assert choose(env, cores=2, load=50.0) is None
        assert env == {name: value}


def test_nothing_once_torch_is_imported() -> None:
    import torch  # noqa: F401  (this process: OpenMP has read its settings already)

    env: dict[str, str] = {}
    assert choose_wait_policy(env, cores=2, load=50.0) is None
    assert env == {}


def test_the_dispatcher_sets_it_before_torch_loads(tmp_path: Path) -> None:
    """A real x-train, in a fresh process whose load average reads 99: the policy is set while torch is
    still not imported, and the run trains (the note is on stdout, not stderr)."""
    config = tmp_path / "prepro.hjson"
    config.write_text(json.dumps({"__parent__": str(REPO / "examples/prepro/reviews_char"),
                                  "data_source": str(REPO / "examples/data/sample/reviews"),
                                  "data_dir": str(tmp_path / "data"), "workers": 1, "max_len": 32}))
    train = tmp_path / "train.hjson"
    train.write_text(json.dumps({"__parent__": "${data_dir}/meta", "data_dir": str(tmp_path / "data"),
                                 "save_dir": str(tmp_path / "run"), "model": "cls_cnn", "embedding_dim": 8,
                                 "num_filters": 4, "kernel_sizes": [2], "loss": "cross_entropy",
                                 "learning_rate": 1e-3, "batch_size": 16, "max_update": 2, "eval_interval": 2,
                                 "major_metric": "accuracy"}))
    code = """import os, sys
from xdpx.utils import cpu_load
seen = []
cpu_load.load_average = lambda: 99.0
original = cpu_load.choose_wait_policy
def spy(*args, **kwargs):
    note = original(*args, **kwargs)
    seen.append(('torch' in sys.modules, os.environ.get('OMP_WAIT_POLICY')))
    return note
import xdpx.chain
xdpx.chain.choose_wait_policy = spy
code = xdpx.chain.run_chain(sys.argv[1:])
print('SEEN', seen)
sys.exit(code)
"""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")}
    result = subprocess.run([sys.executable, "-c", code, "x-prepro", str(config), "x-train", str(train)],
                            capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "SEEN [(False, 'PASSIVE')]" in result.stdout
    assert f"note: load average 99.0 on {usable_cores()} usable core(s)" in result.stdout
    assert "OMP_WAIT_POLICY" not in result.stderr
    assert (tmp_path / "run" / "valid.log.tsv").exists()
