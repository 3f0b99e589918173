"""Fully sharded data parallel (``fsdp: true``): torch's FSDP2, ``torch.distributed.fsdp.fully_shard``.

Each process keeps 1/N of every parameter, of its gradient and of its optimizer state; a layer's full
weights are gathered for its forward and backward only. That is how a model larger than one device's
memory trains on N of them. The loop is the same as with DDP: gradients are averaged over the processes
(FSDP's reduce-scatter, as DDP's all-reduce), the update's sample count is summed, so the effective batch
contract holds (docs/architecture.md, invariant 8).

Units: the model's encoder layers when it offers them (``encoder_layers()``: the BERT and transformers
models), each sharded on its own so only one layer is gathered at a time; then the whole model (the rest:
embeddings, heads). ``fsdp_sharding``: ``full`` (ZeRO-3: parameters freed again after the forward),
``grad_op`` (ZeRO-2: kept gathered from the forward to the backward: less communication, more memory),
``hybrid`` (HSDP: sharded within a machine, replicated across machines).

Saving: state.pt and the checkpoints hold the *full* state in the form an unsharded run writes (a plain
state_dict of the model; the optimizer state keyed by parameter index, torch's own Optimizer format),
gathered with torch.distributed.checkpoint's state_dict helpers (``full_state_dict=True``, offloaded to
the CPU of rank 0). Why not DCP's sharded checkpoints: the exports, x-eval, x-pred and x-serve read one
plain state_dict, a resume on another world size (or without FSDP) needs nothing else, and the run
directory stays one folder of plain files (invariant 1). The price is that rank 0 holds the full state on
the CPU while it writes, which the machine's memory (not the GPU's) must hold.
"""

from __future__ import annotations

import os
from typing import Any

import torch

from xdpx.runtime.distributed import all_gather_objects


def is_sharded(module: torch.nn.Module) -> bool:
    """Whether ``module`` was sharded by :func:`shard_model` (FSDP2)."""
    from torch.distributed.fsdp import FSDPModule  # lazy: torch.distributed.fsdp loads slowly

    return isinstance(module, FSDPModule)


def shard_model(module: torch.nn.Module, device: torch.device, sharding: str, say: Any) -> None:
    """Shard ``module`` in place over the processes (before its optimizer is built: FSDP2 replaces the
    parameters by sharded DTensors). With one process there is nothing to shard."""
    # lazy: torch.distributed.device_mesh loads slowly
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard  # lazy: torch.distributed.fsdp loads slowly

    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    if world == 1:
        say("fsdp: one process, so nothing is sharded (the run trains as without fsdp)")
        return
    if sharding == "hybrid":
        local = int(os.environ.get("LOCAL_WORLD_SIZE", world))
        mesh = init_device_mesh(device.type, (world // local, local), mesh_dim_names=("replicate", "shard"))
    else:
        mesh = init_device_mesh(device.type, (world,))
    reshard = sharding != "grad_op"
    layers = list(module.encoder_layers()) if hasattr(module, "encoder_layers") else []
    for layer in layers:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(module, mesh=mesh, reshard_after_forward=reshard)
    say(f"fsdp: {sum(p.numel() for p in module.parameters())} parameters sharded over {world} processes "
        f"({sharding}; mesh {tuple(mesh.shape)}; {len(layers)} layer unit(s) and the model)")


def local_numel(tensors: Any) -> int:
    """Elements this process holds of ``tensors`` (a DTensor's local shard; a plain tensor whole)."""
    return sum((t.to_local() if hasattr(t, "to_local") else t).numel() for t in tensors)


def shard_report(module: torch.nn.Module, optimizer: Any) -> dict[str, int]:
    """Elements of the parameters and of the optimizer state this process holds, and the model's total."""
    states = [value for state in optimizer.state.values() for value in state.values()
              if isinstance(value, torch.Tensor) and value.dim() > 0]
    return {"parameters": local_numel(module.parameters()), "optimizer": local_numel(states),
            "model_parameters": sum(p.numel() for p in module.parameters())}


def describe_shares(module: torch.nn.Module, optimizer: Any, context: Any) -> str:
    """What each process holds of the parameters and the optimizer state, against an unsharded copy (a
    collective: every process calls it)."""
    mine = shard_report(module, optimizer)
    reports = all_gather_objects(mine, context)
    total = mine["model_parameters"]
    # an unsharded process holds every parameter, and the optimizer state of the same shapes
    full = total + sum(r["optimizer"] for r in reports)
    held = ", ".join(f"rank {rank} {r['parameters']} + {r['optimizer']} = "
                     f"{(r['parameters'] + r['optimizer']) / full:.1%}" for rank, r in enumerate(reports))
    return (f"fsdp: parameters + optimizer state elements per process, of the {full} one unsharded process "
            f"holds ({total} parameters): {held}")


def _options() -> Any:
    # lazy: torch.distributed.checkpoint.state_dict loads slowly
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, cpu_offload=True)


def full_model_state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The model's plain state_dict; of a sharded model, gathered (a collective: every process calls it;
    rank 0 gets the tensors, on the CPU, the others an empty dict)."""
    if not is_sharded(module):
        return module.state_dict()
    # lazy: torch.distributed.checkpoint.state_dict loads slowly
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return get_model_state_dict(module, options=_options())


def full_optimizer_state(module: torch.nn.Module, optimizer: Any) -> dict[str, Any]:
    """``optimizer.state_dict()``; of a sharded model, gathered (a collective, as :func:`full_model_state`)
    and keyed by parameter index as an unsharded optimizer writes it, so any run can load it."""
    if not is_sharded(module):
        return optimizer.state_dict()
    # lazy: torch.distributed.checkpoint.state_dict loads slowly
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    by_name = get_optimizer_state_dict(module, optimizer, options=_options())
    if not by_name:
        return {}
    names = [name for group in by_name["param_groups"] for name in group["params"]]
    index = {name: i for i, name in enumerate(names)}
    return {"state": {index[name]: value for name, value in by_name["state"].items()},
            "param_groups": [{**group, "params": [index[name] for name in group["params"]]}
                             for group in by_name["param_groups"]]}


def load_full_state(module: torch.nn.Module, optimizer: Any, model_state: dict[str, Any],
                    optimizer_state: dict[str, Any]) -> None:
    """Load a full (plain) state into the sharded ``module`` and its optimizer: each process keeps its
    shard (every process has read the whole state.pt)."""
    # lazy: torch.distributed.checkpoint.state_dict loads slowly
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_model_state_dict,
        set_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True)
    set_model_state_dict(module, model_state, options=options)
    names = {id(p): name for name, p in module.named_parameters()}
    order = [names[id(p)] for group in optimizer.param_groups for p in group["params"]]
    by_name = {"state": {order[i]: value for i, value in optimizer_state["state"].items()},
               "param_groups": [{**group, "params": [order[i] for i in group["params"]]}
                                for group in optimizer_state["param_groups"]]}
    set_optimizer_state_dict(module, optimizer, by_name, options=options)
