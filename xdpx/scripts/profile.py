"""``x-script profile CONFIG [--steps N] [--out DIR]``: a few training updates under torch.profiler.

The x-train config is resolved as x-train would, then trained for N updates (default 5) by the real
training loop, into DIR/run (no evaluation, no checkpoint). Every module's forward is a named range
(``module:<name>``), so DIR/trace.json (open it in chrome://tracing or https://ui.perfetto.dev) shows
where the time goes, and DIR/modules.tsv lists each module's forward time: total, self (without its
submodules) and calls. The first update includes one-time warm-up costs.
"""

from __future__ import annotations

import sys
from typing import Any

from xdpx import io
from xdpx.chain import resolve_runs
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.io.ownership import Output, check_outputs, claim
from xdpx.models.choice import model_label

RANGE_PREFIX = "module:"


MODULES_HEADER = "module\ttype\tcalls\ttotal_ms\tself_ms\n"


def is_profile_dir(path: str) -> bool:
    """A --out folder this tool wrote before XDPX kept records: its modules.tsv has the tool's header."""
    try:
        with io.open(io.join(path, "modules.tsv")) as f:
            return f.read(len(MODULES_HEADER)) == MODULES_HEADER
    except OSError:
        return False


USAGE = "usage: x-script profile CONFIG [--steps N] [--out DIR]"


def _parse(argv: list[str]) -> tuple[str, int, str]:
    usage = USAGE
    config, steps, out = None, 5, None
    i = 0
    while i < len(argv):
        if argv[i] in ("--steps", "--out") and i + 1 < len(argv):
            if argv[i] == "--steps":
                if not argv[i + 1].isdigit() or int(argv[i + 1]) < 1:
                    raise ConfigError(f"{usage}: --steps takes a positive integer, got {argv[i + 1]!r}")
                steps = int(argv[i + 1])
            else:
                out = argv[i + 1]
            i += 2
        elif config is None and not argv[i].startswith("-"):
            config, i = argv[i], i + 1
        else:
            raise ConfigError(f"{usage} (unexpected {argv[i]!r})")
    if config is None:
        raise ConfigError(usage)
    return config, steps, out or "profile"


class ModuleRanges:
    """Forward pre/post hooks opening and closing a profiler range named after each module."""

    def __init__(self, model: Any) -> None:
        self.model, self.handles, self.open = model, [], {}

    def __enter__(self) -> ModuleRanges:
        import torch  # lazy: torch is heavy; x-script --help imports every tool

        for name, module in self.model.named_modules():
            label = RANGE_PREFIX + (name or "(model)")

            def pre(module: Any, inputs: Any, label: str = label) -> None:
                context = torch.profiler.record_function(label)
                context.__enter__()
                self.open.setdefault(label, []).append(context)

            def post(module: Any, inputs: Any, output: Any, label: str = label) -> None:
                self.open[label].pop().__exit__(None, None, None)

            self.handles += [module.register_forward_pre_hook(pre), module.register_forward_hook(post)]
        return self

    def __exit__(self, *exc: object) -> None:
        for handle in self.handles:
            handle.remove()


def module_table(events: Any, model: Any) -> list[tuple[str, str, int, float, float]]:
    """(module, type, calls, total ms, self ms) from the profiler's averages, by total time."""
    totals: dict[str, tuple[int, float]] = {}
    for event in events:
        if event.key.startswith(RANGE_PREFIX):
            totals[event.key[len(RANGE_PREFIX):]] = (event.count, event.cpu_time_total / 1000.0)
    types = {(name or "(model)"): type(module).__name__ for name, module in model.named_modules()}
    rows = []
    for name, (calls, total) in totals.items():
        prefix = "" if name == "(model)" else name + "."
        children = [n for n in totals if n != name and (name == "(model)" or n.startswith(prefix))
                    and "." not in (n if name == "(model)" else n[len(prefix):])]
        self_ms = total - sum(totals[c][1] for c in children)
        rows.append((name, types.get(name, ""), calls, total, max(self_ms, 0.0)))
    return sorted(rows, key=lambda r: -r[3])


@script("profile")
def main(argv: list[str]) -> int:
    """Train a few updates of an x-train config under torch.profiler: Chrome trace + per-module times."""
    import torch  # lazy: torch is heavy; x-script --help imports every tool

    from xdpx.train.loop import Trainer  # lazy: torch is heavy; x-script --help imports every tool

    config, steps, out = _parse(argv)
    runs = resolve_runs("x-train", config)
    args = runs[0]
    overrides = {"save_dir": io.join(out, "run"), "overwrite": True, "auto_suffix": False, "resume": False,
                 "max_update": steps, "train_steps": None, "valid_subset": None, "save": False, "viz": False,
                 "tensorboard": False, "inspect_gradient": False, "log_interval": steps, "tolerance": None}
    output = Output("--out", out, "folder", legacy=is_profile_dir)
    problems = check_outputs("profile", [output], [("CONFIG", config), ("data_dir", args.data_dir)],
                             lambda _key: "x-script profile")
    if problems:
        raise ConfigError(problems)
    for key, value in overrides.items():
        setattr(args, key, value)
    io.makedirs(out)
    claim("profile", out)  # checked above: a new or empty folder, or one this tool wrote
    trainer = Trainer(args)
    model = trainer.module
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available() and not args.cpu:
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.profiler.profile(activities=activities) as profiler, ModuleRanges(model):
        trainer.fit()
    trace = io.join(out, "trace.json")
    profiler.export_chrome_trace(trace)
    rows = module_table(profiler.key_averages(), model)
    with io.open(io.join(out, "modules.tsv"), "w") as f:
        f.write(MODULES_HEADER)
        f.writelines(f"{n}\t{t}\t{c}\t{tot:.3f}\t{s:.3f}\n" for n, t, c, tot, s in rows)
    print(f"\n{steps} updates of {model_label(args)} profiled: forward time per module (self = without submodules)")
    print(f"{'module':40s} {'type':18s} {'calls':>6s} {'total ms':>10s} {'self ms':>10s}")
    for name, kind, calls, total, self_ms in rows[:40]:
        print(f"{name[:40]:40s} {kind[:18]:18s} {calls:6d} {total:10.2f} {self_ms:10.2f}")
    print("\nops by self CPU time:")
    print(profiler.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    print(f"wrote {trace} (chrome://tracing or ui.perfetto.dev) and {io.join(out, 'modules.tsv')}", file=sys.stderr)
    return 0
