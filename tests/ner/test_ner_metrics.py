"""Entity reading and entity-level metrics against seqeval / conlleval numbers, and the CRF against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from xdpx.data.tags import entity_spans, tags_of
from xdpx.metrics.entities import count_entities, entity_metrics
from xdpx.models.modules.crf import CRF


@pytest.mark.parametrize("tags,expected", [
    (["B-PER", "I-PER", "O", "B-LOC"], [(0, 2, "PER"), (3, 4, "LOC")]),
    (["O", "I-PER", "I-PER", "O"], [(1, 3, "PER")]),                   # I- without B- begins an entity
    (["B-PER", "I-LOC", "O"], [(0, 1, "PER"), (1, 2, "LOC")]),         # a type change inside a span
    (["B-PER", "B-PER"], [(0, 1, "PER"), (1, 2, "PER")]),
    (["O", "B-LOC", "I-LOC"], [(1, 3, "LOC")]),                        # an entity at the sentence end
    (["S-PER", "B-LOC", "E-LOC", "S-ORG"], [(0, 1, "PER"), (1, 3, "LOC"), (3, 4, "ORG")]),  # BIOES
    (["B-PER", "E-PER", "I-PER"], [(0, 2, "PER"), (2, 3, "PER")]),     # I- after E- begins another
    (["O", "E-PER"], [(1, 2, "PER")]),
], ids=["plain", "i-without-b", "type-change", "b-b", "at-end", "bioes-singletons", "i-after-e", "e-alone"])
def test_entities_are_read_as_seqeval_reads_them(tags, expected):
    assert entity_spans(tags) == expected


def test_tags_round_trip_through_both_schemes_and_repair_invalid_sequences():
    spans = [(0, 1, "PER"), (2, 5, "LOC")]
    assert tags_of(6, spans, "bio") == ["B-PER", "O", "B-LOC", "I-LOC", "I-LOC", "O"]
    assert tags_of(6, spans, "bioes") == ["S-PER", "O", "B-LOC", "I-LOC", "E-LOC", "O"]
    assert entity_spans(tags_of(6, spans, "bioes")) == spans
    assert tags_of(3, entity_spans(["O", "I-PER", "I-PER"]), "bio") == ["O", "B-PER", "I-PER"]


def test_entity_scores_equal_seqevals_readme_example():
    # seqeval's README: f1 0.50, precision 0.50, recall 0.50, accuracy 0.80; MISC f1 0, PER f1 1
    gold = [["O", "O", "O", "B-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    predicted = [["O", "O", "B-MISC", "I-MISC", "I-MISC", "I-MISC", "O"], ["B-PER", "I-PER", "O"]]
    counts = count_entities(list(zip(gold, predicted)))
    assert counts.scores() == (0.5, 0.5, 0.5)
    assert counts.units_right / counts.units == 0.8
    assert counts.scores("MISC")[2] == 0.0 and counts.scores("PER")[2] == 1.0


def test_metrics_from_concatenated_rows_keep_sentences_apart():
    labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    # sentence 1: gold B-PER, predicted B-PER; sentence 2: gold B-PER O, predicted I-PER O (read as B-PER).
    # Read as one sequence, the I-PER would continue the first entity and both would be wrong.
    rows = np.array([[1, 1], [2, 1], [0, 0], [3, 1], [4, 0]], dtype=np.float32)
    targets = np.array([1, 1, 0, 3, 0])
    metrics = entity_metrics(rows, targets, labels)
    # sentence 3: gold B-LOC O, predicted B-LOC I-LOC: a longer span is a wrong entity (and a wrong tag)
    assert metrics["entity_precision"] == metrics["entity_recall"] == metrics["entity_f1"] == pytest.approx(2 / 3)
    assert metrics["entity_f1_PER"] == 1.0 and metrics["entity_f1_LOC"] == 0.0
    assert metrics["token_accuracy"] == pytest.approx(3 / 5)


def test_crf_likelihood_and_viterbi_equal_brute_force_enumeration():
    torch.manual_seed(0)
    tags, length = 3, 4
    crf = CRF(tags)
    emissions = torch.randn(2, length, tags)
    mask = torch.tensor([[True] * 4, [True, True, True, False]])
    for b in range(2):
        n = int(mask[b].sum())
        scores = {}
        for path in itertools.product(range(tags), repeat=n):
            s = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
            s = s + sum(emissions[b, i, path[i]] for i in range(n))
            s = s + sum(crf.transitions[path[i - 1], path[i]] for i in range(1, n))
            scores[path] = s
        log_z = torch.logsumexp(torch.stack(list(scores.values())), 0)
        gold = list(next(iter(scores)))
        padded = torch.tensor([gold + [-100] * (length - n)] * 2)
        assert crf.log_likelihood(emissions, padded, mask)[b].item() == pytest.approx((scores[tuple(gold)] - log_z).item(),
                                                                                      abs=1e-5)
        best = max(scores, key=lambda p: scores[p].item())
        assert crf.viterbi(emissions, mask)[b].tolist() == list(best) + [-1] * (length - n)
