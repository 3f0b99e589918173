"""x-train's loop against a minimal hand-written PyTorch loop: same model, same batches, one process.

    python examples/prepare_data.py                 # once: the full Chinese reviews (else the samples)
    python bench/bench_train.py [--updates 150] [--repeats 3] [--model cls_cnn] [--batch-size 64] [--threads N]

Both sides train the same model (built by the same task from the same seed) with the same optimizer,
built by x-train's own optimizer registry from the same args (x-train's default: fused AdamW, eps 1e-6;
the class, kernel and hyperparameters are printed), clipping at 5.0, on the same update groups (x-train's
batching by length, shuffled from (seed, epoch)), collating each batch with the same processor. The
hand loop is the textbook ``zero_grad / forward / loss / backward / clip / step``; x-train runs its
whole loop (autocast context, update normalisation, logs, policy checks). Runs alternate (hand, x-train,
hand, ...) and the best of ``--repeats`` is kept. Also printed: the share of x-train's loop time outside
forward/backward/optimizer step (batching, logging, bookkeeping). The device is chosen automatically (CUDA when present).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def prepare_data(folder: str) -> str:
    from xdpx.cli import run_chain

    full = os.path.join(ROOT, "examples", "data", "full", "reviews")
    source = full if os.path.isdir(full) else os.path.join(ROOT, "examples", "data", "sample", "reviews")
    config = os.path.join(folder, "prepro.hjson")
    with open(config, "w") as f:
        json.dump({"__parent__": os.path.join(ROOT, "examples", "prepro", "reviews_char"), "data_source": source,
                   "data_dir": os.path.join(folder, "data"), "workers": 2}, f)
    assert run_chain(["x-prepro", config]) == 0
    return os.path.join(folder, "data")


def make_args(data_dir: str, save_dir: str, model: str, batch_size: int, updates: int):  # type: ignore[no-untyped-def]
    from xdpx.cli import resolve_runs

    config = os.path.join(os.path.dirname(save_dir), f"train-{os.path.basename(save_dir)}.hjson")
    with open(config, "w") as f:
        json.dump({"__parent__": "${data_dir}/meta", "data_dir": data_dir, "save_dir": save_dir, "overwrite": True,
                   "model": model, "loss": "cross_entropy", "batch_size": batch_size, "learning_rate": 1e-3,
                   "max_update": updates, "eval_interval": -1, "valid_subset": None, "log_interval": 50,
                   "major_metric": "accuracy", "save": False, "dropout": 0.0}, f)
    return resolve_runs("x-train", config)[0]


def run_xtrain(args) -> tuple[float, float, int]:  # type: ignore[no-untyped-def]
    """(seconds in the loop, seconds in forward/backward/step, samples)."""
    from xdpx.train.loop import Trainer

    trainer = Trainer(args)
    trainer.fit()
    return trainer.time["total"], trainer.time["compute"], trainer.samples_seen


def run_hand(args) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """The minimal loop on x-train's update groups (same seed -> same init and the same batches)."""
    import torch
    import torch.nn.functional as F

    from xdpx.data import processors
    from xdpx.data.dataset import open_split
    from xdpx.tasks import tasks
    from xdpx.train.batching import update_groups
    from xdpx.train.setup import component

    torch.manual_seed(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = tasks.get(args.task)(args).build_model().to(device)
    optimizer = component(args, "optimizer").build(args, model)  # what x-train builds: same class and settings
    processor = processors.get(args.processor)(args)
    data = open_split(args.data_dir, "train")
    groups, epoch = [], 1
    while len(groups) < args.max_update:
        groups += update_groups(data.sizes, args.batch_size, args.seed, epoch)
        epoch += 1
    model.train()
    samples = 0
    start = time.perf_counter()
    for group in groups[: args.max_update]:
        batch = processor.collate([data[int(i)] for i in group])
        tokens, target = batch["net_input"]["tokens"].to(device), batch["target"].to(device)
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(tokens), target, reduction="sum") / len(group)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        samples += len(group)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, samples


def describe_optimizer(args) -> str:  # type: ignore[no-untyped-def]
    """The optimizer both sides build: class and the hyperparameters of its first group."""
    import torch

    from xdpx.train.setup import component

    optimizer = component(args, "optimizer").build(args, torch.nn.Linear(2, 2))
    group = optimizer.param_groups[0]
    keys = ("lr", "betas", "eps", "weight_decay", "fused", "foreach")
    return type(optimizer).__name__ + " " + ", ".join(f"{k}={group.get(k)}" for k in keys if k in group)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", default="cls_cnn")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (both sides); default: torch's")
    options = parser.parse_args(argv)
    import torch

    if options.threads:
        torch.set_num_threads(options.threads)

    with tempfile.TemporaryDirectory() as folder:
        data_dir = prepare_data(folder)
        args = make_args(data_dir, os.path.join(folder, "run"), options.model, options.batch_size, options.updates)
        run_hand(make_args(data_dir, os.path.join(folder, "warm"), options.model, options.batch_size, 5))  # warm-up
        hand, xtrain = [], []
        for repeat in range(options.repeats):
            for side in (("hand", "xtrain") if repeat % 2 == 0 else ("xtrain", "hand")):  # alternate who goes first
                if side == "hand":
                    seconds, samples = run_hand(args)
                    hand.append(samples / seconds)
                else:
                    seconds, compute, samples = run_xtrain(args)
                    xtrain.append((samples / seconds, 1 - compute / seconds))
    best_hand, median_hand = max(hand), sorted(hand)[len(hand) // 2]
    (best_xtrain, overhead), median_xtrain = max(xtrain), sorted(x for x, _ in xtrain)[len(xtrain) // 2]
    device = "cuda" if torch.cuda.is_available() else f"cpu ({torch.get_num_threads()} threads)"
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"model {options.model}, batch {options.batch_size}, {options.updates} updates, device {device}, "
          f"best of {options.repeats}; optimizer (both sides): {describe_optimizer(args)}")
    print("| loop | best samples/s | ratio | median samples/s | ratio |\n| --- | --- | --- | --- | --- |")
    print(f"| minimal PyTorch loop | {best_hand:,.0f} | 1.00 | {median_hand:,.0f} | 1.00 |")
    print(f"| x-train | {best_xtrain:,.0f} | {best_xtrain / best_hand:.3f} | {median_xtrain:,.0f} | "
          f"{median_xtrain / median_hand:.3f} |")
    print(f"x-train loop time outside forward/backward/step: {overhead:.2%} "
          f"(all runs: {', '.join(f'{o:.2%}' for _, o in xtrain)})")
    print(f"all runs, samples/s: hand {', '.join(f'{h:,.0f}' for h in hand)}; "
          f"x-train {', '.join(f'{x:,.0f}' for x, _ in xtrain)}")


if __name__ == "__main__":
    main()
