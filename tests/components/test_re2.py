"""RE2's structure (Yang et al., 2019): blocks, alignment, fusion, augmented residuals, prediction."""

from __future__ import annotations

import math

import torch

from tests.components.helpers import make_args
from xdpx.models import models


def build(**config: object) -> torch.nn.Module:
    torch.manual_seed(0)
    base = {"model": "re2", "embedding_dim": 10, "hidden_size": 6}
    return models.get("re2").build(make_args(**{**base, **config}))


def test_blocks_see_the_embeddings_beside_the_previous_outputs():
    net = build(blocks=3)
    assert len(net.blocks) == 3
    first_layer = [block.encoder.layers[0].convs[0].in_channels for block in net.blocks]
    assert first_layer == [10, 16, 16]  # embedding, then [embedding; residual of width hidden_size]


def test_augmented_residual_adds_the_last_two_block_outputs():
    embedded, previous, before = torch.randn(2, 4, 10), torch.randn(2, 4, 6), torch.randn(2, 4, 6)
    joined = build().connect(embedded, previous, before)
    torch.testing.assert_close(joined, torch.cat([embedded, (previous + before) * math.sqrt(0.5)], dim=-1))


def test_alignment_and_fusion_variants():
    full = build()
    block = full.blocks[0]
    assert block.alignment.projection is not None  # e_ij = F(a_i) . F(b_j) with F a learned layer
    assert block.fusion.full and block.fusion.merge.linear.in_features == 3 * 6  # three views merged
    simple = build(alignment="identity", fusion="simple", prediction="simple")
    assert simple.blocks[0].alignment.projection is None
    assert not simple.blocks[0].fusion.full
    assert simple.head.hidden.linear.in_features == 2 * 6  # [v1; v2]
    assert full.head.hidden.linear.in_features == 4 * 6  # [v1; v2; v1 - v2; v1 * v2]


def test_alignment_attends_only_to_real_tokens_of_the_other_text():
    block = build().blocks[0].eval()
    a, b = torch.randn(1, 3, 16), torch.randn(1, 4, 16)
    mask_a = torch.tensor([[True, True, True]])
    mask_b = torch.tensor([[True, True, False, False]])
    changed_b = b.clone()
    changed_b[:, 2:] = 100.0  # padding content must not matter
    with torch.no_grad():
        aligned_a, _ = block.alignment(a, b, mask_a, mask_b)
        aligned_changed, _ = block.alignment(a, changed_b, mask_a, mask_b)
    torch.testing.assert_close(aligned_a, aligned_changed)


def test_symmetric_prediction_uses_the_absolute_difference():
    net = build(prediction="symmetric").eval()
    tokens1, tokens2 = torch.randint(1, 50, (2, 5)), torch.randint(1, 50, (2, 4))
    assert net(tokens1=tokens1, tokens2=tokens2).shape == (2, 3)
