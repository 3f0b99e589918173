"""``x-script prune_heads SAVE_DIR OUT --heads N [--split dev] [--checkpoint <best>] [--batch-size B]``:
remove the N least important attention heads of a BERT run.

Importance is measured as in Michel et al. (2019), "Are Sixteen Heads Really Better than One?": each
head's output is multiplied by a gate xi_h = 1, and the importance of the head is the mean over the split
of |dL/dxi_h| (the loss summed per batch, model in eval mode, divided by the number of samples), then
normalised per layer by the L2 norm of the layer's importances. The N heads of lowest importance over all
layers are pruned (a layer keeps at least one head): their rows of query/key/value and their columns of the
attention output projection are removed, so the pruned model computes exactly what the gated model did
with those gates at 0.

OUT is a new run directory that x-eval, x-pred, x-serve and the exports load as any other: args.py (the
run's, with ``pruned_heads`` holding the original head numbers of every pruned head, so the model is
rebuilt with the smaller shapes), the checkpoint under its original name with checkpoints.json naming it
<best> and <last>, the run's vocab.txt / target_map.txt, and head_importance.tsv (layer, head, importance,
pruned). The split is scored before and after pruning (printed). A run pruned before can be pruned again.
"""

from __future__ import annotations

import contextlib
from typing import Any

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.config.options import resolve
from xdpx.config.writers import ARGS_FILE, read_args, write_run_files
from xdpx.data.dataset import open_split
from xdpx.errors import UserError
from xdpx.io.ownership import Output, check_outputs, claim
from xdpx.models.checkpoints import save_torch, write_index
from xdpx.scripts.result_tables import number_flag, split_flags

USAGE = ("usage: x-script prune_heads SAVE_DIR OUT --heads N [--split dev] [--checkpoint <best>] "
         "[--batch-size B]")
RUN_TEXT_FILES = ("vocab.txt", "target_map.txt", "tokenizer.json")


def attention_layers(model: Any) -> list[Any]:
    """The BertAttention module of every layer (models with a ``bert`` encoder)."""
    bert = getattr(model, "bert", None)
    layers = getattr(getattr(bert, "encoder", None), "layer", None)
    if layers is None:
        raise UserError(f"prune_heads: the run's model ({type(model).__name__}) is not a BERT model: only the "
                        "bert_* models have attention heads to prune")
    return [layer.attention for layer in layers]


def head_importance(task: Any, model: Any, processor: Any, data: Any, batch_size: int) -> list[list[float]]:
    """Per layer, per current head: mean |d loss / d gate| over ``data``, normalised per layer (L2)."""
    import torch  # lazy: torch is heavy; x-script --help imports every tool

    from xdpx.runtime.scoring import length_order  # lazy: torch is heavy; x-script --help imports every tool

    layers = attention_layers(model)
    gates = [torch.ones(a.self.heads, requires_grad=True) for a in layers]

    def gate_hook(gate: torch.Tensor) -> Any:
        def hook(_module: Any, _inputs: Any, output: torch.Tensor) -> torch.Tensor:
            b, t, width = output.shape
            return (output.view(b, t, gate.numel(), -1) * gate.to(output.dtype)[:, None]).reshape(b, t, width)
        return hook

    handles = [a.self.register_forward_hook(gate_hook(g)) for a, g in zip(layers, gates)]
    totals = [torch.zeros(a.self.heads) for a in layers]
    model.eval()  # no dropout: the gradient of the model that is pruned
    order, samples = length_order(data.sizes), 0
    try:
        for start in range(0, len(order), batch_size):
            batch = processor.collate([data[int(j)] for j in order[start: start + batch_size]])
            loss, _size, logs = task.loss(model, batch)
            grads = torch.autograd.grad(loss, gates)
            for total, grad in zip(totals, grads):
                total += grad.abs()
            samples += int(logs["nsamples"])
    finally:
        for handle in handles:
            handle.remove()
    scores = []
    for total in totals:
        mean = total / max(samples, 1)
        scores.append((mean / (mean.norm() + 1e-20)).tolist())
    return scores


def least_important(scores: list[list[float]], count: int) -> dict[int, list[int]]:
    """``{layer: [current head indices]}`` of the ``count`` lowest scores; every layer keeps one head."""
    ranked = sorted((value, layer, head) for layer, row in enumerate(scores) for head, value in enumerate(row))
    chosen: dict[int, list[int]] = {}
    for _value, layer, head in ranked:
        if sum(map(len, chosen.values())) == count:
            break
        if len(chosen.get(layer, [])) + 1 < len(scores[layer]):
            chosen.setdefault(layer, []).append(head)
    return {layer: sorted(heads) for layer, heads in sorted(chosen.items())}


def original_numbers(pruned_before: dict[str, list[int]], heads_per_layer: int, layer: int) -> list[int]:
    """The original head number of each current head of ``layer`` (earlier pruning removed some)."""
    gone = set(pruned_before.get(str(layer), []))
    return [h for h in range(heads_per_layer) if h not in gone]


def _parse(argv: list[str]) -> tuple[str, str, int, str, str, int | None]:
    positional, flags = split_flags(argv, {"heads": None, "split": "dev", "checkpoint": "<best>",
                                           "batch_size": None}, USAGE)
    if len(positional) != 2 or flags["heads"] is None:
        raise ConfigError([USAGE])
    heads = number_flag(flags, "heads", USAGE, low=0)
    batch = number_flag(flags, "batch_size", USAGE, low=0) if flags["batch_size"] is not None else None
    if heads != int(heads) or (batch is not None and batch != int(batch)):
        raise ConfigError([f"--heads and --batch-size are whole numbers. {USAGE}"])
    return positional[0], positional[1], int(heads), str(flags["split"]), str(flags["checkpoint"]), \
        int(batch) if batch is not None else None


def write_run(loaded: Any, out: str, new_pruned: dict[str, list[int]], model: Any, header: str) -> str:
    """OUT as a run directory of the pruned model; returns the checkpoint's path."""
    # lazy: the run-loading side; every command's --help imports each tool's module
    from xdpx.inference.loading import training_root

    values = read_args(io.join(loaded.save_dir, ARGS_FILE))
    values.update(save_dir=out, pruned_heads=new_pruned)
    args = resolve(values, training_root(), "train", check_paths=False, origin=io.join(loaded.save_dir, ARGS_FILE))
    io.makedirs(out)
    claim("prune_heads", out)  # checked before: a new or empty folder, or one this tool wrote
    write_run_files(args, out, header)
    name = io.basename(loaded.checkpoint) if loaded.checkpoint else "checkpoint-0.pt"
    save_torch(model.state_dict(), io.join(out, name))
    write_index(out, {"best": name, "last": name})
    for text in RUN_TEXT_FILES:
        if io.exists(io.join(loaded.save_dir, text)):
            io.copy(io.join(loaded.save_dir, text), io.join(out, text))
    return io.join(out, name)


@script("prune_heads")
def main(argv: list[str]) -> int:
    """Prune the least important attention heads of a BERT run (Michel et al., 2019) into a new run dir."""
    save_dir, out, count, split, checkpoint, batch_size = _parse(argv)
    problems = check_outputs("prune_heads", [Output("OUT", out, "folder")], [("SAVE_DIR", save_dir)],
                             lambda _key: "x-script prune_heads")
    if problems:
        raise ConfigError(problems)
    # lazy: the run loader and its files wait for a run (x-script --help imports every tool)
    from xdpx.export.loading import load_run
    from xdpx.runtime.run_files import format_value  # lazy: as above
    from xdpx.runtime.scoring import evaluate  # lazy: torch is heavy; x-script --help imports every tool

    loaded = load_run(save_dir, checkpoint)
    model, task, args = loaded.model, loaded.task, loaded.args
    layers = attention_layers(model)
    total_heads = sum(a.self.heads for a in layers)
    if count > total_heads - len(layers):
        raise UserError(f"prune_heads: --heads {count}: the model has {total_heads} heads in {len(layers)} layers "
                        f"and every layer keeps one, so at most {total_heads - len(layers)} can go")
    data = open_split(args.data_dir, split)
    batch_size = batch_size or int(args.get("valid_batch_size") or args.batch_size)

    def score(when: str) -> None:
        metrics = evaluate(task, model, loaded.processor, data, batch_size, contextlib.nullcontext())
        print(f"{when} ({split}, {len(data)} samples): " + " | ".join(f"{k} {format_value(v)}" for k, v in
                                                                       metrics.items()))

    score(f"before: {total_heads} heads")
    scores = head_importance(task, model, loaded.processor, data, batch_size)
    chosen = least_important(scores, count)
    pruned_before = {str(k): list(v) for k, v in (args.get("pruned_heads") or {}).items()}
    heads_per_layer = int(args.num_attention_heads)
    new_pruned = {layer: list(heads) for layer, heads in pruned_before.items()}
    rows = ["layer\thead\timportance\tpruned"]
    for layer, row in enumerate(scores):
        numbers = original_numbers(pruned_before, heads_per_layer, layer)
        for current, value in enumerate(row):
            gone = current in chosen.get(layer, [])
            rows.append(f"{layer}\t{numbers[current]}\t{value:.6g}\t{'yes' if gone else 'no'}")
        if chosen.get(layer):
            new_pruned[str(layer)] = sorted(set(new_pruned.get(str(layer), [])) |
                                            {numbers[h] for h in chosen[layer]})
    parameters_before = sum(p.numel() for p in model.parameters())
    for layer, heads in chosen.items():
        layers[layer].prune_heads(heads)
    parameters_after = sum(p.numel() for p in model.parameters())
    score(f"after: {total_heads - count} heads")
    header = f"# x-script prune_heads: {count} heads of {loaded.checkpoint} pruned by importance on {split}\n"
    path = write_run(loaded, out, new_pruned, model, header)
    with io.open(io.join(out, "head_importance.tsv"), "w") as f:
        f.write("\n".join(rows) + "\n")
    print(f"pruned heads (original numbers): {new_pruned}")
    print(f"parameters: {parameters_before:,} -> {parameters_after:,}; wrote {path} (load it with x-eval "
          f"save_dir: {out})")
    return 0
