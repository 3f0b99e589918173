"""BERT's layers (Devlin et al., 2019), HF's parameter names: embeddings, self-attention (one fused
projection, SDPA or written out), the encoder stack, the pooler and :class:`BertModel`; with the helpers the
heads share (attention_bias, mean_pool, init_weights) and the FLOP count of the encoder.

The encoder built from them is xdpx/models/encoders/bert.py; the heads are in xdpx/models/heads/.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from xdpx.models.modules.capture import capturing_graph
from xdpx.models.modules.dropout import Dropout, dropout
from xdpx.models.modules.packed_attention import packed_self_attention

ACTIVATIONS = {
    "gelu": F.gelu, "relu": F.relu, "silu": F.silu, "swish": F.silu, "tanh": torch.tanh,
    "gelu_new": lambda x: F.gelu(x, approximate="tanh"), "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
}


class BertEmbeddings(nn.Module):
    def __init__(self, c: Any) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_index)
        self.position_embeddings = nn.Embedding(c.max_position_embeddings, c.hidden_size)
        self.token_type_embeddings = nn.Embedding(c.type_vocab_size, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = Dropout(c.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(input_ids.size(1), device=input_ids.device)
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids) \
            + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))


class BertSelfAttention(nn.Module):
    """query / key / value as three Linear layers (HF's names), applied as one fused matmul."""

    def __init__(self, c: Any, pruned: Sequence[int] = ()) -> None:
        super().__init__()
        # a pruned layer (pruned_heads, x-script prune_heads) keeps fewer heads of the same size
        self.heads, self.head_size = c.num_attention_heads - len(set(pruned)), c.hidden_size // c.num_attention_heads
        inner = self.heads * self.head_size
        self.query = nn.Linear(c.hidden_size, inner)
        self.key = nn.Linear(c.hidden_size, inner)
        self.value = nn.Linear(c.hidden_size, inner)
        self.dropout_p = c.attention_probs_dropout_prob
        self._fused: tuple[tuple[int, ...], torch.Tensor, torch.Tensor] | None = None  # not in the state_dict
        # an int8 model's query, key and value as one dynamic int8 matmul (xdpx/models/int8.py sets it; a plain
        # attribute, not a submodule, so the state_dict keeps the three layers)
        self.int8_qkv: Callable[[torch.Tensor], torch.Tensor] | None = None

    def train(self, mode: bool = True) -> BertSelfAttention:
        # torch's fused optimizers (x-train's default AdamW) write the weights in place without bumping
        # their version, so a kept projection would outlive an update: every mode switch drops it (x-train
        # switches to train() before each update and to eval() for each evaluation)
        self._fused = None
        return super().train(mode)

    def fused_projection(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The [3H, H] weight and [3H] bias. With gradients enabled they are concatenated in every forward
        (autograd needs the graph); without gradients (x-eval, x-pred, x-serve) they are kept until a
        parameter changes (in place: its version; moved or cast: its storage) or the module switches
        between train() and eval() (fused optimizer steps change no version), because concatenating
        anew for each request cost as much as the matmul for one short sentence (a fresh 1.7 MB block per
        layer on MiniLM)."""
        parts = (self.query.weight, self.key.weight, self.value.weight, self.query.bias, self.key.bias,
                 self.value.bias)
        if torch.is_grad_enabled() or capturing_graph():
            return torch.cat(parts[:3]), torch.cat(parts[3:])
        key = tuple(v for p in parts for v in (p._version, p.data_ptr()))
        if self._fused is None or self._fused[0] != key:
            with torch.no_grad():
                self._fused = (key, torch.cat(parts[:3]), torch.cat(parts[3:]))
        return self._fused[1], self._fused[2]

    def projector(self) -> Callable[[torch.Tensor, slice], torch.Tensor]:
        """``project(x, parts)``: x through ``(query, key, value)[parts]``, concatenated on the last dim.
        Plain Linears: rows of the one fused [3H, H] weight. A projection wrapped by LoRA (peft,
        xdpx/models/lora.py) runs its own forward instead, so that its adapter and dropout apply."""
        linears = (self.query, self.key, self.value)
        h = self.heads * self.head_size
        if self.int8_qkv is not None:  # one int8 matmul for the three, as the float path does with one fused weight
            fused = self.int8_qkv
            return lambda x, parts: fused(x) if parts == slice(0, 3) else fused(x)[..., parts.start * h:parts.stop * h]
        if any(type(m) is not nn.Linear for m in linears):
            return lambda x, parts: torch.cat([m(x) for m in linears[parts]], dim=-1)
        weight, bias = self.fused_projection()
        return lambda x, parts: F.linear(x, weight[parts.start * h:parts.stop * h],
                                         bias[parts.start * h:parts.stop * h])

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, first_only: bool = False) -> torch.Tensor:
        """``[B, T, H]`` -> ``[B, T, H]``; with ``first_only``, ``[B, 1, H]``: the first token's query over
        every token's key and value (see :meth:`BertEncoder.forward`)."""
        b, t, _ = x.shape
        h = self.heads * self.head_size  # the hidden size, less the pruned heads
        project = self.projector()
        dropout_p = self.dropout_p if self.training else 0.0
        if first_only:
            k, v = project(x, slice(1, 3)).view(b, t, 2, self.heads, self.head_size).permute(2, 0, 3, 1, 4)
            q = project(x[:, :1], slice(0, 1)).view(b, 1, self.heads, self.head_size).transpose(1, 2)
            t = 1
        else:  # one [3H, H] matmul instead of three
            qkv = project(x, slice(0, 3)).view(b, t, 3, self.heads, self.head_size)
            if written_out_is_faster(qkv, dropout_p):  # its gradients go straight into qkv's layout
                return packed_self_attention(qkv, mask, dropout_p)
            q, k, v = qkv.permute(2, 0, 3, 1, 4)
        if written_out_is_faster(q, dropout_p):
            out = written_out_attention(q, k, v, mask, dropout_p)
        else:
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)
        return out.transpose(1, 2).reshape(b, t, h)


def written_out_is_faster(q: torch.Tensor, dropout_p: float) -> bool:
    """Whether :func:`written_out_attention` beats SDPA: on the CPU, when gradients are computed and there
    is attention dropout or q is not fp32. torch's CPU SDPA kernels have no dropout: training with it fell
    to SDPA's math path (bf16 upcast to fp32, so its matmuls missed AMX; a bernoulli_ mask). Without
    dropout, its flash kernel's backward is slow in bf16: [32, 12, 34, 32] forward + backward took 52-55 ms
    against 9-18 ms written out (one thread), while in fp32 (7 ms) and without gradients it is the faster.
    Compiled and traced code keeps SDPA (inductor fuses it; exports keep one op)."""
    if q.device.type != "cpu" or not torch.is_grad_enabled() or capturing_graph():
        return False
    return dropout_p > 0 or q.dtype != torch.float32


def written_out_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                          p: float = 0.0) -> torch.Tensor:
    """SDPA (with dropout ``p`` on the attention probabilities) as matmul, softmax, dropout, matmul: the
    matmuls run in the autocast dtype, the dropout mask from xdpx's cheaper CPU dropout
    (xdpx/models/modules/dropout.py). The softmax takes the scores in their dtype, as CPU autocast does:
    torch computes it in fp32 inside and rounds the probabilities once to bf16, which the second matmul
    needed anyway. Asking for fp32 probabilities (HF's eager attention, SDPA's math path) adds an fp32
    copy and a cast each way: [32, 12, 34, 32] forward + backward took 7.0 ms with them and 5.9 ms without
    (one thread); the probabilities differ by at most one bf16 rounding, the gradients of q by 0.37%
    (about one bf16 rounding too). In fp32 nothing changes."""
    scores = torch.matmul(q * q.size(-1) ** -0.5, k.transpose(-1, -2))
    if mask is not None:  # True = attend; a finite minimum keeps an all-padding row finite (uniform)
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, dim=-1).to(v.dtype)
    return torch.matmul(dropout(probs, p) if p > 0 else probs, v)


class BertSelfOutput(nn.Module):
    def __init__(self, c: Any, width: int) -> None:
        super().__init__()
        self.dense = nn.Linear(width, c.hidden_size)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, eps=c.layer_norm_eps)
        self.dropout = Dropout(c.hidden_dropout_prob)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dropout(self.dense(x)) + residual)


class BertAttention(nn.Module):
    def __init__(self, c: Any, pruned: Sequence[int] = ()) -> None:
        super().__init__()
        self.self = BertSelfAttention(c, pruned)
        self.output = BertSelfOutput(c, self.self.heads * self.self.head_size)

    def prune_heads(self, heads: Sequence[int]) -> None:
        """Remove ``heads`` (indices among this layer's current heads): their rows of query/key/value and
        their columns of the output projection go, so the layer computes exactly what it did with those
        heads' outputs set to zero."""
        attention, size = self.self, self.self.head_size
        keep = [i for i in range(attention.heads) if i not in set(heads)]
        rows = torch.cat([torch.arange(i * size, (i + 1) * size) for i in keep])
        with torch.no_grad():
            for name in ("query", "key", "value"):
                old = getattr(attention, name)
                new = nn.Linear(old.in_features, len(rows)).to(old.weight)
                new.weight.copy_(old.weight[rows])
                new.bias.copy_(old.bias[rows])
                setattr(attention, name, new)
            dense = self.output.dense
            new = nn.Linear(len(rows), dense.out_features).to(dense.weight)
            new.weight.copy_(dense.weight[:, rows])
            new.bias.copy_(dense.bias)
            self.output.dense = new
        attention.heads, attention._fused = len(keep), None

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, first_only: bool = False) -> torch.Tensor:
        return self.output(self.self(x, mask, first_only), x[:, :1] if first_only else x)


class BertIntermediate(nn.Module):
    def __init__(self, c: Any) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)
        self.act = ACTIVATIONS[c.hidden_act]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, c: Any, pruned: Sequence[int] = ()) -> None:
        super().__init__()
        self.attention = BertAttention(c, pruned)
        self.intermediate = BertIntermediate(c)
        self.output = BertSelfOutput(c, c.intermediate_size)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, first_only: bool = False) -> torch.Tensor:
        x = self.attention(x, mask, first_only)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, c: Any) -> None:
        super().__init__()
        pruned = c.get("pruned_heads") or {}  # {"layer": [heads]} (HF's config.json pruned_heads)
        self.layer = nn.ModuleList(BertLayer(c, pruned.get(str(i), ())) for i in range(c.num_hidden_layers))
        self.gradient_checkpointing = bool(c.get("gradient_checkpointing"))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, first_only: bool = False) -> torch.Tensor:
        """The last hidden states ``[B, T, H]``, or with ``first_only`` only the first token's ``[B, 1, H]``.

        A head that reads only the first token ([CLS] pooling) needs nothing else of the last layer: every
        token's key and value, and the first token's query, attention output and feed-forward. The other
        rows of the last layer (5/6 of its matmuls and all its per-token work) cost 14% of MiniLM's
        encoder for outputs no loss reads; the first token's result is the same arithmetic either way.
        (MLPerf's BERT implementations do the same for the masked positions of pretraining.)"""
        checkpointing = self.gradient_checkpointing and self.training and torch.is_grad_enabled()
        last = len(self.layer) - 1
        for i, layer in enumerate(self.layer):
            only = first_only and i == last
            if checkpointing:
                # keep only each layer's input; its activations are recomputed in backward (same dropout
                # masks: the RNG state is restored for the recomputation)
                x = checkpoint(layer, x, mask, only, use_reentrant=False)
            else:
                x = layer(x, mask, only)
        return x


class BertPooler(nn.Module):
    def __init__(self, c: Any) -> None:
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    """The encoder (HF's BertModel): ``embeddings``, ``encoder``, and ``pooler`` when ``add_pooler``."""

    def __init__(self, c: Any, add_pooler: bool = True) -> None:
        super().__init__()
        self.embeddings = BertEmbeddings(c)
        self.encoder = BertEncoder(c)
        self.pooler = BertPooler(c) if add_pooler else None

    def forward(self, input_ids: torch.Tensor, token_type_ids: torch.Tensor | None = None,
                attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """(last hidden states ``[B, T, H]``, pooled ``[B, H]`` or None), as HF's BertModel."""
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        hidden = self.encode(self.embeddings(input_ids, token_type_ids), attention_mask)
        return hidden, self.pooler(hidden) if self.pooler is not None else None

    def encode(self, embedded: torch.Tensor, attention_mask: torch.Tensor | None,
               first_only: bool = False) -> torch.Tensor:
        """The last hidden states ``[B, T, H]``; ``[B, 1, H]`` (the first token's) with ``first_only``."""
        return self.encoder(embedded, attention_bias(attention_mask, embedded.dtype), first_only)


def attention_bias(attention_mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    """``[B, 1, 1, T]`` boolean (True = attend) for SDPA; None when no token is padding (the fast path).

    The fast path branches on the data, which tracing (TorchScript) and torch.export (ONNX) would bake
    into the exported graph: while exporting, the mask is always applied (same outputs, no branch)."""
    if attention_mask is None:
        return None
    exporting = torch.jit.is_tracing() or torch.compiler.is_exporting()
    if not exporting and bool(attention_mask.all()):
        return None
    return attention_mask.bool()[:, None, None, :]


def mean_pool(hidden: torch.Tensor, attention_mask: torch.Tensor | None) -> torch.Tensor:
    if attention_mask is None:
        return hidden.mean(1)
    weights = attention_mask.to(hidden.dtype).unsqueeze(-1)
    return (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)


def init_weights(module: nn.Module, std: float) -> None:
    """BERT's initialisation: N(0, initializer_range) weights, zero biases, unit LayerNorms."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=std)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=std)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)


def count_flops(model: nn.Module, tokens: int, seq_len: int, first_only: bool = False) -> float:
    """Training FLOPs (forward + backward = 3 x forward) of the encoder for ``tokens`` tokens in rows of
    ``seq_len``: 6 x parameters-in-matmuls x tokens plus attention's 12 x layers x T x H per token. With
    ``first_only`` the last layer computes every token's key and value but the rest for the first token of
    each row only (:meth:`BertEncoder.forward`)."""
    bert = model.bert if hasattr(model, "bert") else model
    layers = len(bert.encoder.layer)
    hidden = bert.embeddings.word_embeddings.embedding_dim
    matmul_params = sum(p.numel() for n, p in bert.encoder.named_parameters() if p.dim() == 2)
    full = 6.0 * matmul_params * tokens + 12.0 * layers * seq_len * hidden * tokens
    if not first_only:
        return full
    # skipped: the last layer's matmuls other than key and value, and its attention, for all but one token a row
    skipped_per_token = 6.0 * (matmul_params / layers - 2 * hidden * hidden) + 12.0 * seq_len * hidden
    return full - skipped_per_token * (tokens - tokens / seq_len)
