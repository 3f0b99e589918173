"""int8 models: how x-script quantize stores one and how x-eval / x-pred / x-serve rebuild it.

On disk (a folder written by x-script quantize, docs/export.md "int8 models"):
- ``int8.json``: the record that makes the folder an int8 model (what was quantized, by which engine);
- ``model_int8.safetensors``: the weights. Each weight matrix of an ``nn.Linear`` (the int8 rows and
  per-row scales torch.ao makes of it, written as they are), ``nn.LSTM`` and word ``nn.Embedding`` (1,000
  rows or more) is stored as int8 with one float32 scale per row (symmetric); every other tensor as it is. safetensors holds tensors only: nothing runs on load, and no
  quantized-tensor pickles are involved (torch.ao's quantized LSTM state does not load with
  ``weights_only=True``, torch's quantized tensors are deprecated).
- ``model_int8.onnx``: the ONNX export quantized by onnxruntime (backend onnx), when it was written.

In memory the rows are multiplied back by their scales into the run's model, then ``nn.Linear`` and
``nn.LSTM`` become dynamic int8 modules (int8 weights, activations quantized per batch) through
``torch.ao.quantization.quantize_dynamic``: measured on this project's CPUs it is the faster of the two
PyTorch engines (torchao 0.18's ``Int8DynamicActivationInt8WeightConfig`` runs slower than float32 on the
CPU without torch.compile, its weight-only config gains less) and the only one with an LSTM. torch.ao is
deprecated in favour of torchao; the storage above does not depend on the engine, so a folder written
now loads with another engine later. Embeddings stay float32 in memory (int8 on disk only).
"""

from __future__ import annotations

import copy
import json
import os
import warnings
from typing import Any

from xdpx import io
from xdpx.errors import UserError

RECORD = "int8.json"
WEIGHTS = "model_int8.safetensors"
ONNX_MODEL = "model_int8.onnx"
SCALE_SUFFIX = ".int8_scale"
# An embedding table of fewer rows (positions, token types) stays float32: it is small, and it is added to
# every token (int8 position and token-type tables cost the MiniLM teacher 0.5 point of dev accuracy)
WORD_TABLE_ROWS = 1000


def read_record(folder: str | None) -> dict[str, Any] | None:
    """The int8.json of ``folder``, or None when it is not an int8 model folder."""
    if not folder:
        return None
    path = io.join(folder, RECORD)
    if not io.isfile(path):
        return None
    with io.open(path) as f:
        record = json.load(f)
    return record if isinstance(record, dict) and record.get("quantization") == "int8" else None


def int8_folder_of(path: str | None) -> str | None:
    """The int8 model folder ``path`` is or lies in (a weights file, ``folder/<best>``), else None."""
    if not path:
        return None
    base = path.split("<", 1)[0].rstrip("/") or "."
    for folder in (base, os.path.dirname(base)):
        if folder and read_record(folder) is not None:
            return folder
    return None


def training_refusal(path: str | None, key: str) -> str | None:
    """Why x-train must not start from or resume ``path`` (an int8 model), or None."""
    folder = int8_folder_of(path)
    if folder is None:
        return None
    return (f"key '{key}': {path!r} is an int8 model written by x-script quantize ({folder}/{RECORD}): its "
            "weights are rounded to int8 for inference only and are never trained; use the run it was quantized "
            "from (its int8.json names it)")


def int8_layers(model: Any) -> dict[str, str]:
    """name -> kind of every layer whose weights are stored int8 (Linear, LSTM, Embedding)."""
    # lazy: torch stays out of x-train's checks and x-serve's start-up, which import this module
    from torch import nn

    kinds = {nn.Linear: "Linear", nn.LSTM: "LSTM", nn.Embedding: "Embedding"}
    return {name: kind for name, module in model.named_modules() for cls, kind in kinds.items()
            if type(module) is cls and (kind != "Embedding" or module.num_embeddings >= WORD_TABLE_ROWS)}


def layer_kinds(model: Any) -> list[str]:
    """The kinds of layers with weights in ``model`` (what an unsupported model is told it holds)."""
    return sorted({type(m).__name__ for m in model.modules() if any(True for _ in m.parameters(recurse=False))})


def int8_weight_names(model: Any) -> set[str]:
    """state_dict keys of the weight matrices stored as int8 rows."""
    names = set()
    for name, kind in int8_layers(model).items():
        module = model.get_submodule(name)
        prefix = f"{name}." if name else ""
        if kind == "LSTM":
            names.update(prefix + p for p, _ in module.named_parameters() if p.startswith("weight_"))
        else:
            names.add(prefix + "weight")
    return names


def pack(state: dict[str, Any], int8_names: set[str], exact: dict[str, tuple[Any, Any]] | None = None) -> dict[str, Any]:
    """The tensors written to model_int8.safetensors: int8 rows plus scales for ``int8_names``; ``exact``:
    name -> (int8 rows, scales) already made by the engine (the Linear weights), written as they are."""
    import torch  # lazy: torch stays out of x-train's checks and x-serve's start-up, which import this module

    out = {}
    for key, value in state.items():
        if exact and key in exact:
            rows, scales = exact[key]
            out[key], out[key + SCALE_SUFFIX] = rows.contiguous(), scales.float().contiguous()
        elif key in int8_names and value.dim() == 2 and value.is_floating_point():
            weight = value.detach().float()
            scale = (weight.abs().amax(dim=1) / 127.0).clamp(min=1e-12)
            out[key] = torch.round(weight / scale[:, None]).clamp(-127, 127).to(torch.int8).contiguous()
            out[key + SCALE_SUFFIX] = scale.contiguous()
        elif torch.is_tensor(value):
            out[key] = value.detach().clone().contiguous()  # clone: tied weights are written as two tensors
    return out


def unpack(tensors: dict[str, Any]) -> dict[str, Any]:
    """The float state_dict (int8 rows times their scales) of what :func:`pack` wrote."""
    state = {}
    for key, value in tensors.items():
        if key.endswith(SCALE_SUFFIX):
            continue
        scale = tensors.get(key + SCALE_SUFFIX)
        state[key] = value.float() * scale[:, None] if scale is not None else value
    return state


def engine_weights(model: Any) -> dict[str, tuple[Any, Any]]:
    """weight name -> (int8 rows, per-row scales) of every Linear and LSTM as the engine quantizes it (Linear
    per channel, LSTM per tensor: its one scale repeated for each row; both symmetric): written as they are, so
    that the model loaded back runs the very int8 weights the engine made from the float ones (rounding them
    to int8 rows of our own first, then letting the engine round those again, cost the MiniLM teacher 0.75
    point of dev accuracy)."""
    import torch  # lazy: as above

    quantized = dynamic_int8(copy.deepcopy(model).cpu())
    exact = {}
    for name, kind in int8_layers(model).items():
        prefix = f"{name}." if name else ""
        if kind == "LSTM":
            for key, weight in lstm_int8_weights(quantized.get_submodule(name)).items():
                if weight.qscheme() == torch.per_tensor_affine and weight.q_zero_point() == 0:
                    exact[prefix + key] = (weight.int_repr(), torch.full((weight.shape[0],), weight.q_scale()))
            continue
        if kind != "Linear":
            continue
        weight = quantized.get_submodule(name).weight()
        if weight.qscheme() != torch.per_channel_affine or bool((weight.q_per_channel_zero_points() != 0).any()):
            continue
        exact[prefix + "weight"] = (weight.int_repr(), weight.q_per_channel_scales())
    return exact


def lstm_int8_weights(module: Any) -> dict[str, Any]:
    """``weight_ih_l0`` ... -> the int8 weight tensor a dynamic int8 LSTM (torch.ao) runs."""
    with warnings.catch_warnings():  # torch's quantized tensors are deprecated: they are the engine's format here
        warnings.simplefilter("ignore")
        return dict(module._weight_bias()["weight"])


def save_int8(model: Any, path: str) -> None:
    """Write the float ``model``'s weights as model_int8.safetensors (see the module's docstring)."""
    from safetensors.torch import save  # lazy: imports torch, as above

    tensors = pack(model.state_dict(), int8_weight_names(model), engine_weights(model))
    data = save(tensors, metadata={"format": "pt", "xdpx": "int8"})
    with io.open(path, "wb") as f:
        f.write(data)


def dynamic_int8(model: Any) -> Any:
    """``model`` (eval mode, CPU) with its Linear and LSTM layers as dynamic int8 modules (torch.ao)."""
    import torch  # lazy: torch stays out of x-train's checks and x-serve's start-up, which import this module
    from torch import nn  # lazy: as above

    with warnings.catch_warnings():  # torch.ao's deprecation notice, once per call: said in the docs instead
        warnings.simplefilter("ignore")
        # lazy: torch.ao warns of its deprecation when imported: inside the catch_warnings above
        from torch.ao.quantization import (
            default_dynamic_qconfig,
            per_channel_dynamic_qconfig,
            quantize_dynamic,
        )

        spec = {nn.Linear: per_channel_dynamic_qconfig, nn.LSTM: default_dynamic_qconfig}
        quantized = quantize_dynamic(model.eval(), spec, dtype=torch.qint8, inplace=True)
    if hasattr(quantized, "rebind_parts"):  # an encoder-and-head model: its head reads its own Linear attributes
        quantized.rebind_parts()
    return quantized


def load_int8(model: Any, path: str) -> Any:
    """The run's freshly built ``model`` with the int8 weights of ``path``, as dynamic int8 modules."""
    from safetensors.torch import load  # lazy: imports torch, as above

    with io.open(path, "rb") as f:
        try:
            tensors = load(f.read())
        except Exception as e:  # safetensors' own errors (header, sizes): the file is damaged
            raise UserError(f"{path} is not a readable int8 model ({type(e).__name__}: {e}); quantize the run "
                            "again") from None
    state = unpack(tensors)
    own = model.state_dict()
    missing, unexpected = sorted(set(own) - set(state)), sorted(set(state) - set(own))
    if missing or unexpected:
        raise UserError(f"{path} does not fit the run's model {type(model).__name__}: "
                        + (f"missing {missing[:5]} " if missing else "") + (f"unexpected {unexpected[:5]}" if unexpected else "")
                        + "; quantize the run again")
    model.load_state_dict(state, strict=True)
    quantized = dynamic_int8(model)
    set_exact_weights(quantized, tensors)
    fuse_query_key_value(quantized)
    return quantized


def fuse_query_key_value(quantized: Any) -> None:
    """Give each attention that takes one (``int8_qkv``, our BERT's self-attention) its query, key and value
    as one dynamic int8 Linear: the same per-row int8 weights and scales one after the other, so the output is
    the three layers' side by side (the input is quantized once for all three either way), in one matmul
    instead of three and a concatenation (7% of the int8 MiniLM's time on a batch of 64)."""
    import torch  # lazy: as above

    with warnings.catch_warnings():  # torch.ao's and quantized tensors' deprecation notices, as above
        warnings.simplefilter("ignore")
        # lazy: torch.ao warns of its deprecation when imported: inside the catch_warnings above
        from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear

        for module in quantized.modules():
            if not hasattr(module, "int8_qkv"):
                continue
            parts = [getattr(module, name, None) for name in ("query", "key", "value")]
            if not all(isinstance(p, DynamicLinear) for p in parts):
                continue
            weights = [p.weight() for p in parts]
            if any(w.qscheme() != torch.per_channel_affine for w in weights):
                continue
            rows = torch.cat([w.int_repr() for w in weights])
            scales = torch.cat([w.q_per_channel_scales() for w in weights])
            zero_points = torch.cat([w.q_per_channel_zero_points() for w in weights])
            biases = [p.bias() for p in parts]
            fused = DynamicLinear(rows.shape[1], rows.shape[0], dtype=torch.qint8)
            fused.set_weight_bias(torch._make_per_channel_quantized_tensor(rows, scales, zero_points, 0),
                                  torch.cat(biases) if all(b is not None for b in biases) else None)
            # a plain attribute (nn.Module's setattr would register a submodule, a fourth layer in the state_dict)
            object.__setattr__(module, "int8_qkv", fused)


def set_exact_weights(quantized: Any, tensors: dict[str, Any]) -> None:
    """Give each dynamic int8 Linear and LSTM the int8 rows and scales stored for it, exactly (not rounded again)."""
    import torch  # lazy: as above

    with warnings.catch_warnings():  # torch's quantized tensors are deprecated: they are the engine's format here
        warnings.simplefilter("ignore")
        for name, module in quantized.named_modules():
            prefix = f"{name}." if name else ""
            if hasattr(module, "_all_weight_values"):  # a dynamic int8 LSTM
                set_exact_lstm_weights(module, prefix, tensors)
                continue
            key = prefix + "weight"
            if not hasattr(module, "set_weight_bias") or key + SCALE_SUFFIX not in tensors:
                continue
            rows, scales = tensors[key], tensors[key + SCALE_SUFFIX].double()
            weight = torch.quantize_per_channel(rows.float() * scales[:, None].float(), scales,
                                                torch.zeros(len(scales), dtype=torch.long), 0, torch.qint8)
            if not torch.equal(weight.int_repr(), rows):  # x * s / s must round back to x
                weight = torch._make_per_channel_quantized_tensor(rows, scales, torch.zeros(len(scales), dtype=torch.long), 0)
            module.set_weight_bias(weight, module.bias())


def set_exact_lstm_weights(module: Any, prefix: str, tensors: dict[str, Any]) -> None:
    """Rebuild a dynamic int8 LSTM's packed cells from the stored int8 rows (one scale per matrix), as torch.ao's
    own conversion packs them (``linear_prepack`` of each matrix, ``make_quantized_cell_params_dynamic``)."""
    import torch  # lazy: as above
    from torch.ao.nn.quantized.dynamic.modules.rnn import PackedParameter  # lazy: torch.ao, as above

    biases = module._weight_bias()["bias"]
    cells = []
    for layer in range(module.num_layers):
        for suffix in ("", "_reverse") if module.bidirectional else ("",):
            packed = []
            for part in ("ih", "hh"):
                key = f"{prefix}weight_{part}_l{layer}{suffix}"
                rows, scales = tensors.get(key), tensors.get(key + SCALE_SUFFIX)
                if rows is None or scales is None or not bool((scales == scales[0]).all()):
                    return  # not stored as the engine makes them (a folder of before): the engine's rounding stays
                weight = torch._make_per_tensor_quantized_tensor(rows, float(scales[0]), 0)
                packed.append(torch.ops.quantized.linear_prepack(weight, biases[f"bias_{part}_l{layer}{suffix}"]))
            cells.append(PackedParameter(torch.ops.quantized.make_quantized_cell_params_dynamic(
                packed[0], packed[1], biases[f"bias_ih_l{layer}{suffix}"], biases[f"bias_hh_l{layer}{suffix}"], True)))
    for i, cell in enumerate(cells):
        module._all_weight_values[i] = cell


def folder_size(folder: str, names: list[str]) -> int:
    """Bytes of the files ``names`` in ``folder`` (those present)."""
    return sum(os.path.getsize(os.path.join(folder, n)) for n in names if os.path.isfile(os.path.join(folder, n)))
