"""Models: output shapes, training on a tiny batch, padding invariance, pretrained embeddings."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.components.helpers import make_args
from xdpx.models import models

SMALL = {
    "cls_cnn": {"embedding_dim": 16, "num_filters": 8, "kernel_sizes": [2, 3]},
    "cls_lstm": {"embedding_dim": 16, "hidden_size": 8},
    "match_cnn": {"embedding_dim": 16, "hidden_size": 8},
    "re2": {"embedding_dim": 16, "hidden_size": 8, "blocks": 3},
}
PAIR_MODELS = {"match_cnn", "re2"}
REGRESSION = {"target_type": "regression", "num_classes": 1, "loss": "mse", "major_metric": "pearson"}


def net_input(model: str, tokens: torch.Tensor, other: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
    if model in PAIR_MODELS:
        return {"tokens1": tokens, "tokens2": tokens.flip(1) if other is None else other}
    return {"tokens": tokens}


def build(model: str, **config: object) -> torch.nn.Module:
    torch.manual_seed(0)
    return models.get(model).build(make_args(model=model, **{**SMALL[model], **config}))


@pytest.mark.parametrize("model", sorted(SMALL))
def test_forward_returns_class_logits_or_one_score(model):
    tokens = torch.randint(1, 50, (5, 9))
    assert build(model)(**net_input(model, tokens)).shape == (5, 3)
    assert build(model, **REGRESSION)(**net_input(model, tokens)).shape == (5,)
    assert build(model, num_classes=1)(**net_input(model, tokens)).shape == (5,)


@pytest.mark.parametrize("model", sorted(SMALL))
def test_padding_does_not_change_the_output(model):
    net = build(model).eval()
    tokens = torch.randint(1, 50, (2, 6))
    padded = torch.cat([tokens, torch.zeros(2, 4, dtype=torch.long)], dim=1)
    other = torch.randint(1, 50, (2, 5))
    other_padded = torch.cat([other, torch.zeros(2, 3, dtype=torch.long)], dim=1)
    with torch.no_grad():
        alone = net(**net_input(model, tokens, other))
        batched = net(**net_input(model, padded, other_padded))
    torch.testing.assert_close(alone, batched, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("model", sorted(SMALL))
def test_a_few_steps_reduce_the_loss(model):
    net = build(model, dropout=0.0)
    tokens = torch.randint(1, 50, (8, 7))
    tokens[:3, 5:] = 0
    target = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    optimizer = torch.optim.Adam(net.parameters(), lr=3e-2)
    losses = []
    for _ in range(20):
        loss = torch.nn.functional.cross_entropy(net(**net_input(model, tokens)), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]


def test_empty_text_gives_finite_output():
    tokens = torch.tensor([[0, 0, 0], [5, 6, 7]])
    for model in SMALL:
        out = build(model).eval()(**net_input(model, tokens))
        assert torch.isfinite(out).all(), model


def write_embeddings(path, rows: int, dim: int, header: bool = False) -> torch.Tensor:
    vectors = torch.arange(rows * dim, dtype=torch.float32).reshape(rows, dim) / 100
    lines = [f"{rows} {dim}"] if header else []
    lines += [f"word{i} " + " ".join(f"{v:.2f}" for v in vectors[i].tolist()) for i in range(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return vectors


@pytest.mark.parametrize("header", [False, True])
def test_pretrained_embeddings_are_loaded_in_vocab_order_with_a_zero_pad_row(tmp_path, header):
    vectors = write_embeddings(tmp_path / "emb.txt", 50, 16, header)
    net = build("cls_cnn", embedding_file=str(tmp_path / "emb.txt"), pad_index=1)
    weight = net.encoder.embedding.embedding.weight
    torch.testing.assert_close(weight[2:], vectors[2:])
    torch.testing.assert_close(weight[0], vectors[0])
    assert weight[1].abs().sum() == 0
    assert weight.requires_grad


def test_embeddings_npy_written_by_prepro_is_loaded(tmp_path):
    matrix = np.random.default_rng(0).normal(size=(50, 16)).astype(np.float32)
    np.save(tmp_path / "embeddings.npy", matrix)
    net = build("cls_lstm", embedding_file=str(tmp_path / "embeddings.npy"))
    torch.testing.assert_close(net.encoder.embedding.embedding.weight[1:], torch.from_numpy(matrix[1:]))


def test_fixed_embeddings_get_no_gradient_and_no_optimizer_slot(tmp_path):
    from xdpx.optim import optimizers

    write_embeddings(tmp_path / "emb.txt", 50, 16)
    args = make_args(model="cls_cnn", **SMALL["cls_cnn"], embedding_file=str(tmp_path / "emb.txt"),
                     fix_embeddings=True)
    net = models.get("cls_cnn").build(args)
    assert not net.encoder.embedding.embedding.weight.requires_grad
    optimizer = optimizers.get("adam").build(args, net)
    in_optimizer = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert id(net.encoder.embedding.embedding.weight) not in in_optimizer


def test_embedding_file_that_does_not_match_the_vocab_is_an_error(tmp_path):
    write_embeddings(tmp_path / "emb.txt", 49, 16)
    with pytest.raises(ValueError, match="has 49 vectors; vocab.txt has 50"):
        build("cls_cnn", embedding_file=str(tmp_path / "emb.txt"))
    write_embeddings(tmp_path / "narrow.txt", 50, 8)
    with pytest.raises(ValueError, match="expected a word and 16 numbers"):
        build("cls_cnn", embedding_file=str(tmp_path / "narrow.txt"))
    np.save(tmp_path / "wide.npy", np.zeros((50, 32), dtype=np.float32))
    with pytest.raises(ValueError, match="width 32; embedding_dim is 16"):
        build("cls_cnn", embedding_file=str(tmp_path / "wide.npy"))
