"""A tiny random BERT under Google's TF variable names, saved by TensorFlow's own tf.compat.v1 Saver
(the way Google's BERT checkpoints were written), for the TF import tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np

# The sizes of conftest.TINY_BERT, so the checkpoint loads into the tiny runs' models.
HIDDEN, INTERMEDIATE, LAYERS, POSITIONS = 16, 32, 2, 64


def google_bert_variables(vocab_size: int, num_labels: int | None = 3, mlm: bool = False,
                          seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    h, i = HIDDEN, INTERMEDIATE
    shapes = {"bert/embeddings/word_embeddings": (vocab_size, h), "bert/embeddings/token_type_embeddings": (2, h),
              "bert/embeddings/position_embeddings": (POSITIONS, h), "bert/embeddings/LayerNorm/gamma": (h,),
              "bert/embeddings/LayerNorm/beta": (h,), "bert/pooler/dense/kernel": (h, h),
              "bert/pooler/dense/bias": (h,)}
    for layer in range(LAYERS):
        p = f"bert/encoder/layer_{layer}/"
        for name in ("attention/self/query", "attention/self/key", "attention/self/value", "attention/output/dense"):
            shapes[f"{p}{name}/kernel"], shapes[f"{p}{name}/bias"] = (h, h), (h,)
        shapes[f"{p}intermediate/dense/kernel"], shapes[f"{p}intermediate/dense/bias"] = (h, i), (i,)
        shapes[f"{p}output/dense/kernel"], shapes[f"{p}output/dense/bias"] = (i, h), (h,)
        for name in ("attention/output/LayerNorm", "output/LayerNorm"):
            shapes[f"{p}{name}/gamma"], shapes[f"{p}{name}/beta"] = (h,), (h,)
    if num_labels:
        shapes["output_weights"], shapes["output_bias"] = (num_labels, h), (num_labels,)
    if mlm:
        shapes.update({"cls/predictions/transform/dense/kernel": (h, h), "cls/predictions/transform/dense/bias": (h,),
                       "cls/predictions/transform/LayerNorm/gamma": (h,),
                       "cls/predictions/transform/LayerNorm/beta": (h,), "cls/predictions/output_bias": (vocab_size,),
                       "cls/seq_relationship/output_weights": (2, h), "cls/seq_relationship/output_bias": (2,)})
    return {name: (0.2 * rng.standard_normal(shape)).astype(np.float32) for name, shape in shapes.items()}


def save_with_tf_saver(variables: dict[str, np.ndarray], directory: Path, with_optimizer_slots: bool = True) -> Path:
    """bert_model.ckpt in directory, written by tf.compat.v1.train.Saver in a graph, like Google's BERT."""
    import tensorflow as tf

    graph = tf.Graph()
    with graph.as_default():
        for name, value in variables.items():
            tf.compat.v1.get_variable(name, initializer=value)
            if with_optimizer_slots and value.ndim == 2:  # what a checkpoint saved during training holds
                tf.compat.v1.get_variable(f"{name}/adam_m", initializer=np.zeros_like(value))
                tf.compat.v1.get_variable(f"{name}/adam_v", initializer=np.zeros_like(value))
        tf.compat.v1.train.get_or_create_global_step()
        saver = tf.compat.v1.train.Saver()
        with tf.compat.v1.Session(graph=graph) as session:
            session.run(tf.compat.v1.global_variables_initializer())
            saver.save(session, str(directory / "bert_model.ckpt"), write_meta_graph=False)
    return directory / "bert_model.ckpt"
