"""The non-transformer models (cls_cnn, cls_lstm, match_cnn, re2) written in TF ops over the run's weights.

Each function below mirrors the PyTorch module of the same name in xdpx/models (eval mode: dropout is
the identity) step by step, with the same masking, so a padded batch gives what the PyTorch model gives.
The weights are kept as variables under their state_dict names ('.' written '/') and in PyTorch's layouts
(Linear ``[out, in]``, Conv1d ``[out, in, kernel]``), so ``from_tf`` reads them back unchanged
(xdpx.models.tf_checkpoint.read_export_savedmodel). TensorFlow is imported inside the functions.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from xdpx.errors import UserError
from xdpx.models import models
from xdpx.models.checkpoints import renamed_prefixes

# model -> the names of its token inputs (the processors' net_input fields), in call order
STUDENT_INPUTS = {"cls_cnn": ("tokens",), "cls_lstm": ("tokens",), "match_cnn": ("tokens1", "tokens2"),
                  "re2": ("tokens1", "tokens2")}


def student_inputs(model_name: str) -> tuple[str, ...]:
    """The token inputs of a model that export_tf writes in TF ops; a UserError for other models."""
    if model_name not in STUDENT_INPUTS:
        raise UserError(f"export_tf: model {model_name!r} has no TF version here (TF SavedModel: "
                        f"{', '.join(STUDENT_INPUTS)} and the BERT models); use export_onnx or export_torchscript")
    return STUDENT_INPUTS[model_name]


class TFLayers:
    """The shared layers of xdpx/models/modules in TF ops, reading weights through ``p(state_dict name)``."""

    def __init__(self, tf: Any, p: Any, pad_index: int) -> None:
        self.tf, self.p, self.pad_index = tf, p, pad_index

    def linear(self, x: Any, prefix: str, bias: bool = True) -> Any:
        out = self.tf.matmul(x, self.p(f"{prefix}.weight"), transpose_b=True)
        return out + self.p(f"{prefix}.bias") if bias else out

    def gelu(self, x: Any) -> Any:
        return self.tf.nn.gelu(x, approximate=False)  # torch's F.gelu default: the exact erf form

    def feed_forward(self, x: Any, prefix: str) -> Any:
        return self.gelu(self.linear(x, f"{prefix}.linear"))

    def head(self, x: Any, prefix: str) -> Any:
        """PredictionHead: a hidden GeLU layer, then the output layer."""
        return self.linear(self.feed_forward(x, f"{prefix}.hidden"), f"{prefix}.out")

    def embed(self, tokens: Any) -> tuple[Any, Any]:
        """Embeddings ``[B, L, D]`` and the mask of real tokens ``[B, L]``."""
        return self.tf.gather(self.p("embedding.embedding.weight"), tokens), self.tf.not_equal(tokens, self.pad_index)

    def zero_padding(self, x: Any, mask: Any) -> Any:
        return self.tf.where(mask[:, :, None], x, self.tf.zeros_like(x))

    def same_conv(self, x: Any, prefix: str) -> Any:
        """SameConv1d on ``[B, L, C]``: explicit zero padding (k-1)//2 left and k//2 right, then VALID."""
        tf = self.tf
        weight = self.p(f"{prefix}.weight")  # [out, in, kernel]
        kernel = int(weight.shape[-1])
        x = tf.pad(x, [[0, 0], [(kernel - 1) // 2, kernel // 2], [0, 0]])
        return tf.nn.conv1d(x, tf.transpose(weight, [2, 1, 0]), stride=1, padding="VALID") + self.p(f"{prefix}.bias")

    def conv_encoder(self, x: Any, mask: Any, prefix: str, layers: int, kernels: int) -> Any:
        """ConvEncoder: per layer, the multi-kernel convolution of the zero-padded input, then GeLU."""
        for i in range(layers):
            x = self.zero_padding(x, mask)
            x = self.gelu(self.tf.concat([self.same_conv(x, f"{prefix}.layers.{i}.convs.{j}") for j in range(kernels)],
                                         axis=-1))
        return self.zero_padding(x, mask)

    def masked_max(self, x: Any, mask: Any) -> Any:
        tf = self.tf
        pooled = tf.reduce_max(tf.where(mask[:, :, None], x, tf.fill(tf.shape(x), x.dtype.min)), axis=1)
        return tf.where(tf.reduce_any(mask, axis=1)[:, None], pooled, tf.zeros_like(pooled))

    def masked_softmax(self, scores: Any, mask: Any, axis: int) -> Any:
        tf = self.tf
        return tf.nn.softmax(tf.where(mask, scores, tf.fill(tf.shape(scores), scores.dtype.min)), axis=axis)

    def pooling(self, x: Any, mask: Any, strategy: str, prefix: str) -> Any:
        """Pooling: max, mean or attention over the real positions."""
        tf = self.tf
        if strategy == "max":
            return self.masked_max(x, mask)
        if strategy == "mean":
            weights = tf.cast(mask, x.dtype)[:, :, None]
            return tf.reduce_sum(x * weights, axis=1) / tf.maximum(tf.reduce_sum(weights, axis=1), 1.0)
        hidden = tf.math.tanh(self.linear(x, f"{prefix}.attention.projection"))
        scores = tf.squeeze(self.linear(hidden, f"{prefix}.attention.score", bias=False), -1)
        return tf.einsum("bl,bld->bd", self.masked_softmax(scores, mask, axis=1), x)

    def lstm_direction(self, x: Any, lengths: Any, suffix: str, backwards: bool) -> Any:
        """One direction of one nn.LSTM layer (gates i, f, g, o) over ``[B, T, D]``; the backward one reads
        each text reversed within its own length, as packing makes PyTorch's do."""
        tf = self.tf
        weight_hh, bias_hh = self.p(f"lstm.weight_hh{suffix}"), self.p(f"lstm.bias_hh{suffix}")
        if backwards:
            x = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
        inputs = tf.transpose(tf.matmul(x, self.p(f"lstm.weight_ih{suffix}"), transpose_b=True)
                              + self.p(f"lstm.bias_ih{suffix}"), [1, 0, 2])  # time first: [T, B, 4H]

        def step(state: tuple[Any, Any], gates_in: Any) -> tuple[Any, Any]:
            h, c = state
            i, f, g, o = tf.split(gates_in + tf.matmul(h, weight_hh, transpose_b=True) + bias_hh, 4, axis=-1)
            c = tf.sigmoid(f) * c + tf.sigmoid(i) * tf.math.tanh(g)
            return tf.sigmoid(o) * tf.math.tanh(c), c

        zeros = tf.zeros([tf.shape(x)[0], int(weight_hh.shape[1])], x.dtype)
        states = tf.transpose(tf.scan(step, inputs, initializer=(zeros, zeros))[0], [1, 0, 2])
        return tf.reverse_sequence(states, lengths, seq_axis=1, batch_axis=0) if backwards else states


def cls_cnn(layers: TFLayers, args: Any, tokens: Any) -> Any:
    tf = layers.tf
    x, mask = layers.embed(tokens)
    x = layers.zero_padding(x, mask)
    features = [layers.masked_max(tf.nn.relu(layers.same_conv(x, f"convs.{j}")), mask)
                for j in range(len(args.kernel_sizes))]
    return layers.linear(tf.concat(features, axis=-1), "out")


def cls_lstm(layers: TFLayers, args: Any, tokens: Any) -> Any:
    tf = layers.tf
    x, mask = layers.embed(tokens)
    # as the model: an empty text still gets one (padding) step, which stays in the states
    lengths = tf.maximum(tf.reduce_sum(tf.cast(mask, tf.int64), axis=1), 1)
    valid = tf.range(tf.shape(tokens, out_type=tf.int64)[1])[None, :] < lengths[:, None]
    for layer in range(args.num_layers):
        both = [layers.lstm_direction(x, lengths, f"_l{layer}", False),
                layers.lstm_direction(x, lengths, f"_l{layer}_reverse", True)]
        x = layers.zero_padding(tf.concat(both, axis=-1), valid)  # what pad_packed_sequence returns
    return layers.head(layers.pooling(x, mask, args.pooling, "pooling"), "head")


def match_cnn(layers: TFLayers, args: Any, tokens1: Any, tokens2: Any) -> Any:
    tf = layers.tf

    def encode(tokens: Any) -> Any:
        x, mask = layers.embed(tokens)
        x = layers.conv_encoder(x, mask, "encoder", args.enc_layers, len(args.kernel_sizes))
        return layers.pooling(x, mask, args.pooling, "pooling")

    a, b = encode(tokens1), encode(tokens2)
    return layers.head(tf.concat([a, b, tf.abs(a - b), a * b], axis=-1), "head")


def re2(layers: TFLayers, args: Any, tokens1: Any, tokens2: Any) -> Any:
    tf = layers.tf
    emb_a, mask_a = layers.embed(tokens1)
    emb_b, mask_b = layers.embed(tokens2)
    pair_mask = tf.logical_and(mask_a[:, :, None], mask_b[:, None, :])

    def block(i: int, a: Any, b: Any) -> tuple[Any, Any]:
        prefix = f"blocks.{i}"
        kernels = len(args.kernel_sizes)
        a = tf.concat([a, layers.conv_encoder(a, mask_a, f"{prefix}.encoder", args.enc_layers, kernels)], axis=-1)
        b = tf.concat([b, layers.conv_encoder(b, mask_b, f"{prefix}.encoder", args.enc_layers, kernels)], axis=-1)
        fa, fb = a, b
        if args.alignment == "linear":
            fa, fb = (layers.feed_forward(t, f"{prefix}.alignment.projection") for t in (a, b))
        scores = tf.matmul(fa, fb, transpose_b=True) * layers.p(f"{prefix}.alignment.temperature")
        aligned_a = tf.matmul(layers.masked_softmax(scores, pair_mask, axis=2), b)
        aligned_b = tf.matmul(layers.masked_softmax(scores, pair_mask, axis=1), a, transpose_a=True)

        def fuse(x: Any, aligned: Any) -> Any:
            if args.fusion != "full":
                return layers.feed_forward(tf.concat([x, aligned], axis=-1), f"{prefix}.fusion.merge")
            views = [layers.feed_forward(tf.concat([x, aligned], -1), f"{prefix}.fusion.concat"),
                     layers.feed_forward(tf.concat([x, x - aligned], -1), f"{prefix}.fusion.difference"),
                     layers.feed_forward(tf.concat([x, x * aligned], -1), f"{prefix}.fusion.product")]
            return layers.feed_forward(tf.concat(views, axis=-1), f"{prefix}.fusion.merge")

        return layers.zero_padding(fuse(a, aligned_a), mask_a), layers.zero_padding(fuse(b, aligned_b), mask_b)

    def connect(embedded: Any, previous: Any, before_previous: Any) -> Any:
        return tf.concat([embedded, (previous + before_previous) * math.sqrt(0.5)], axis=-1)

    a, b = emb_a, emb_b
    outputs_a: list[Any] = []
    outputs_b: list[Any] = []
    for i in range(args.blocks):
        if i > 0:
            a = connect(emb_a, outputs_a[-1], outputs_a[-2] if i > 1 else 0.0)
            b = connect(emb_b, outputs_b[-1], outputs_b[-2] if i > 1 else 0.0)
        out_a, out_b = block(i, a, b)
        outputs_a.append(out_a)
        outputs_b.append(out_b)
    v1, v2 = layers.masked_max(outputs_a[-1], mask_a), layers.masked_max(outputs_b[-1], mask_b)
    features = {"simple": [v1, v2], "full": [v1, v2, v1 - v2, v1 * v2],
                "symmetric": [v1, v2, tf.abs(v1 - v2), v1 * v2]}[args.prediction]
    return layers.head(tf.concat(features, axis=-1), "head")


FORWARD = {"cls_cnn": cls_cnn, "cls_lstm": cls_lstm, "match_cnn": match_cnn, "re2": re2}


def legacy_layout(weights: dict[str, Any], model_name: str) -> dict[str, Any]:
    """The weights under the names of the release before the encoder/head design (the aliases' legacy_keys,
    reversed): the TF forward functions below and the SavedModels they wrote use those names; from_tf renames
    them back when it reads a SavedModel (xdpx.models.checkpoints.upgraded)."""
    renames = {new: old for old, new in getattr(models.get(model_name), "legacy_keys", {}).items()}
    return renamed_prefixes(weights, renames)


def build_tf_student(weights: dict[str, np.ndarray], args: Any, fix_len: int | None = None) -> Any:
    """A tf.Module holding the weights (attribute ``w``) whose ``logits(*token inputs)`` is the model's
    forward; ``ids_serving`` is the tf.function with the int64 ``[batch, length]`` signature (the length
    fixed to ``fix_len`` when given) returning ``{'logits': ...}``."""
    import tensorflow as tf  # lazy: optional tensorflow

    inputs = student_inputs(args.model)
    forward = FORWARD[args.model]
    weights = legacy_layout(weights, args.model)
    single_output = int(weights["head.out.bias" if "head.out.bias" in weights else "out.bias"].shape[0]) == 1

    class TFStudent(tf.Module):
        def __init__(self) -> None:
            super().__init__(name=args.model)
            # non-trainable variables named as the state_dict: the SavedModel stores each weight once, by name
            self.w = {k.replace(".", "/"): tf.Variable(v, trainable=False, name=k.replace(".", "/"))
                      for k, v in weights.items()}

        def p(self, name: str) -> Any:
            return self.w[name.replace(".", "/")]

        def logits(self, *tokens: Any) -> Any:
            out = forward(TFLayers(tf, self.p, int(args.pad_index)), args, *tokens)
            return tf.squeeze(out, -1) if single_output else out

        def serve_ids(self, *tokens: Any) -> dict[str, Any]:
            return {"logits": self.logits(*tokens)}

    module = TFStudent()
    spec = [tf.TensorSpec([None, fix_len], tf.int64, name=name) for name in inputs]
    module.ids_serving = tf.function(module.serve_ids, input_signature=spec, autograph=False)
    return module
