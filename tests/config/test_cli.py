"""The shared dispatcher: chaining, --dry, loops checked before work, exit codes."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from xdpx.cli import EXIT_CONFIG, EXIT_FAILED, UserError, run_chain
from xdpx.command import Command, commands
from xdpx.config.options import Option

CALLS: list[tuple[str, object, bool]] = []


@commands.register("x-record")
class Record(Command):
    """A test command that records its runs and fails on demand."""

    group = "record"
    output_key = "save_dir"

    def options(self):
        return [Option("save_dir", str, required=True), Option("fail", bool, default=False),
                Option("learning_rate", float, default=0.1), Option("batch_size", int, default=8)]

    def run(self, args, dry=False):
        if args.fail:
            raise UserError("asked to fail")
        CALLS.append(("record", args.save_dir, dry))


@pytest.fixture(autouse=True)
def clear_calls():
    CALLS.clear()


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


def test_chain_runs_in_order_and_stops_at_first_failure(tmp_path, capsys):
    a = write(tmp_path / "a.hjson", "{save_dir: a}")
    bad = write(tmp_path / "bad.hjson", "{save_dir: b, fail: true}")
    c = write(tmp_path / "c.hjson", "{save_dir: c}")
    assert run_chain(["x-record", a, "x-record", bad, "x-record", c]) == EXIT_FAILED
    assert [call[1] for call in CALLS] == ["a"]
    assert "asked to fail" in capsys.readouterr().err


def test_dry_prints_every_run_and_the_count(tmp_path, capsys):
    cfg = write(tmp_path / "grid.hjson", """
        { __parent__: [ [ {learning_rate: 1e-5} {learning_rate: 2e-5} ] [ {batch_size: 32} {batch_size: 64} ] ]
          save_dir: outputs/run.lr${learning_rate}.bs${batch_size} }""")
    assert run_chain(["x-record", cfg, "--dry"]) == 0
    out = capsys.readouterr().out
    assert "4 runs, all valid" in out
    assert out.index("run.lr1e-05.bs32") < out.index("run.lr2e-05.bs32") < out.index("run.lr1e-05.bs64")
    assert "* learning_rate" in out and "  fail" in out
    assert all(dry for _, _, dry in CALLS)


def test_loop_runs_sharing_an_output_dir_fail_before_any_work(tmp_path, capsys):
    cfg = write(tmp_path / "grid.hjson", "{__parent__: [{learning_rate: 1}, {learning_rate: 2}], save_dir: same}")
    assert run_chain(["x-record", cfg]) == EXIT_CONFIG
    assert "runs 1 and 2 share save_dir 'same'" in capsys.readouterr().err
    assert CALLS == []


def test_invalid_run_in_a_loop_stops_everything(tmp_path, capsys):
    cfg = write(tmp_path / "grid.hjson", "{__parent__: [{batch_size: 1}, {batch_size: 'x'}], save_dir: o${batch_size}}")
    assert run_chain(["x-record", cfg]) == EXIT_CONFIG
    assert "run 2 of 2" in capsys.readouterr().err
    assert CALLS == []


def test_misspelt_key_exits_2_with_did_you_mean(tmp_path, capsys):
    cfg = write(tmp_path / "typo.hjson", "{save_dir: x, learning_rat: 0.1}")
    assert run_chain(["x-record", cfg]) == EXIT_CONFIG
    err = capsys.readouterr().err
    assert "typo.hjson: unknown key 'learning_rat'. Did you mean 'learning_rate'?" in err


def test_usage_errors(tmp_path, capsys):
    assert run_chain(["x-record"]) == EXIT_CONFIG
    assert "give a config file" in capsys.readouterr().err
    assert run_chain(["x-record", str(tmp_path / "none.hjson")]) == EXIT_CONFIG
    assert "not found" in capsys.readouterr().err


def test_user_dir_components_load_only_when_named(tmp_path):
    pkg = tmp_path / "my_components"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "from xdpx.command import Command, commands\n"
        "from xdpx.config.options import Option\n"
        "@commands.register('x-mine')\n"
        "class Mine(Command):\n"
        "    group = 'mine'\n"
        "    def options(self):\n"
        "        return [Option('color', str, default='red')]\n"
        "    def run(self, args, dry=False):\n"
        "        open(args.color, 'w').write('ran')\n"
    )
    assert "x-mine" not in commands
    from xdpx.registry import load_user_dir

    load_user_dir(str(pkg))
    out = tmp_path / "out.txt"
    cfg = write(tmp_path / "c.hjson", f"{{user_dir: {pkg}, color: {out}}}")
    assert run_chain(["x-mine", cfg]) == 0
    assert out.read_text() == "ran"


def test_import_has_no_side_effects():
    code = ("import sys, xdpx, xdpx.cli, xdpx.config.loader, xdpx.config.options, xdpx.io;"
            "heavy = [m for m in ('torch', 's3fs', 'matplotlib', 'tokenizers') if m in sys.modules];"
            "print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_no_eval_or_exec_in_the_package():
    # Parse every module and look for calls to the builtins eval/exec/compile (invariant 2 of docs/architecture.md).
    root = Path(__file__).resolve().parents[2] / "xdpx"
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id in ("eval", "exec", "compile", "__import__"):
                offenders.append(f"{path}:{node.lineno}: {node.func.id}()")
    assert offenders == []
