"""A linear-chain conditional random field over per-unit tag scores (Lafferty et al., 2001), as used on
top of BiLSTM and BERT taggers (Lample et al., 2016): the sentence log-likelihood for training and Viterbi
decoding. Written here (about 60 lines) because pytorch-crf, the usual package, has had no release since
2019; the parameter layout (start, end, transitions[from, to]) is pytorch-crf's.

With :meth:`CRF.constrain` (the tagging head's ``crf_constraints``) transitions that the tag scheme forbids
(``O -> I-PER``) get a score of -10000 in training and decoding alike, so Viterbi never returns an invalid
sequence. The allowed transitions are buffers, not weights: they follow from the labels and are not saved.

Shapes: emissions ``[B, U, C]``, tags ``[B, U]``, mask ``[B, U]`` (True on real units, a prefix of each row,
at least one per row). Everything is computed in float32.
"""

from __future__ import annotations

import torch
from torch import nn

FORBIDDEN = -10000.0  # finite: a sentence whose gold tags break the scheme still has a finite loss


class CRF(nn.Module):
    """Transition scores between ``num_tags`` tags, plus scores of starting and ending on each tag."""

    def __init__(self, num_tags: int) -> None:
        super().__init__()
        self.start_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.end_transitions = nn.Parameter(torch.empty(num_tags).uniform_(-0.1, 0.1))
        self.transitions = nn.Parameter(torch.empty(num_tags, num_tags).uniform_(-0.1, 0.1))
        self.constrained = False

    def constrain(self, transitions: list[list[bool]], start: list[bool], end: list[bool]) -> None:
        """Forbid the transitions (and first and last tags) marked False."""
        self.register_buffer("allowed", torch.tensor(transitions, dtype=torch.bool), persistent=False)
        self.register_buffer("allowed_start", torch.tensor(start, dtype=torch.bool), persistent=False)
        self.register_buffer("allowed_end", torch.tensor(end, dtype=torch.bool), persistent=False)
        self.constrained = True

    def scores(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(start, end, transitions) with the forbidden ones at -10000."""
        if not self.constrained:
            return self.start_transitions, self.end_transitions, self.transitions
        return (self.start_transitions.masked_fill(~self.allowed_start, FORBIDDEN),
                self.end_transitions.masked_fill(~self.allowed_end, FORBIDDEN),
                self.transitions.masked_fill(~self.allowed, FORBIDDEN))

    def log_likelihood(self, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """log p(tags | emissions) of each sentence ``[B]``."""
        emissions = emissions.float()
        start, end, transitions = self.scores()
        tags = tags.clamp(min=0)  # padding (-100) is masked out; any valid index will do
        mask_f = mask.float()
        # the gold path's score, all positions at once: emissions, transitions between real units, start, end
        emitted = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)
        moved = transitions[tags[:, :-1], tags[:, 1:]]
        last = tags.gather(1, (mask.sum(1) - 1).unsqueeze(1)).squeeze(1)
        score = (start[tags[:, 0]] + (emitted * mask_f).sum(1) + (moved * mask_f[:, 1:]).sum(1) + end[last])
        return score - self._log_partition(emissions, mask, start, end, transitions)

    @staticmethod
    def _log_partition(emissions: torch.Tensor, mask: torch.Tensor, start: torch.Tensor, end: torch.Tensor,
                       transitions: torch.Tensor) -> torch.Tensor:
        alpha = start + emissions[:, 0]
        for i in range(1, emissions.size(1)):
            step = torch.logsumexp(alpha.unsqueeze(2) + transitions + emissions[:, i].unsqueeze(1), dim=1)
            alpha = torch.where(mask[:, i].unsqueeze(1), step, alpha)
        return torch.logsumexp(alpha + end, dim=1)

    @torch.no_grad()
    def viterbi(self, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The most likely tags ``[B, U]`` (-1 after each sentence's last unit)."""
        emissions = emissions.float()
        start, end, transitions = self.scores()
        score = start + emissions[:, 0]
        history = []
        for i in range(1, emissions.size(1)):
            candidates = score.unsqueeze(2) + transitions + emissions[:, i].unsqueeze(1)
            # argmax + gather: Tensor.max(dim) with indices over a middle dim is 100x slower on the CPU
            index = candidates.argmax(dim=1)
            best = candidates.gather(1, index.unsqueeze(1)).squeeze(1)
            score = torch.where(mask[:, i].unsqueeze(1), best, score)
            history.append(index)
        current = (score + end).argmax(dim=1)
        out = torch.full(mask.shape, -1, dtype=torch.long, device=emissions.device)
        for i in range(emissions.size(1) - 1, 0, -1):
            real = mask[:, i]
            out[:, i] = torch.where(real, current, out[:, i])
            previous = history[i - 1].gather(1, current.unsqueeze(1)).squeeze(1)
            current = torch.where(real, previous, current)
        out[:, 0] = current
        return out
