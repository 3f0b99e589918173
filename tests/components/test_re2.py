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


def with_tied_text_weights(net: torch.nn.Module) -> torch.nn.Module:
    """The prediction layer's weights for v2 set to those for v1: then only the comparison features
    (|v1 - v2| or v1 - v2, v1 * v2) can make the output depend on the order of the texts."""
    weight = net.head.hidden.linear.weight
    hidden = weight.shape[1] // 4
    with torch.no_grad():
        weight[:, hidden: 2 * hidden] = weight[:, :hidden]
    return net


def test_symmetric_prediction_gives_the_same_output_for_either_order():
    # 'symmetric' features are [v1; v2; |v1 - v2|; v1 * v2]: the blocks treat both texts alike and the
    # comparison features are order-free, so swapping the texts only swaps v1 and v2. (The v1 and v2
    # weights of a trained model differ, so the model as trained is not order-invariant; see re2.py.)
    tokens1 = torch.tensor([[5, 9, 13, 2, 0], [7, 7, 31, 40, 11]])
    tokens2 = torch.tensor([[21, 3, 8, 0], [4, 17, 6, 0]])  # other lengths and padding than tokens1
    net = with_tied_text_weights(build(prediction="symmetric", blocks=2).eval())
    with torch.no_grad():
        forward, backward = net(tokens1=tokens1, tokens2=tokens2), net(tokens1=tokens2, tokens2=tokens1)
    assert forward.shape == (2, 3)
    torch.testing.assert_close(forward, backward, atol=1e-5, rtol=1e-5)
    assert (forward[0] - forward[1]).abs().max() > 1e-3  # the outputs depend on the texts at all
    # 'full' with v1 - v2 is order-dependent under the same tying: the check above can tell the two apart
    full = with_tied_text_weights(build(prediction="full", blocks=2).eval())
    with torch.no_grad():
        difference = full(tokens1=tokens1, tokens2=tokens2) - full(tokens1=tokens2, tokens2=tokens1)
    assert difference.abs().max() > 1e-3
