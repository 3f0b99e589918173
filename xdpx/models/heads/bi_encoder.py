"""``head: bi_encoder``: sentence embeddings for retrieval and similarity. Every text of a sample
(``tokens1``, ``tokens2`` and, with hard negatives, ``tokens3``: processors bi_encoder / bert_bi_encoder)
goes through the same encoder on its own: the fields are padded to one length and encoded as one batch.
The output is ``[B, K, D]``: the sentence vector of each of the K texts (the encoder's pooling, mean by
default as sentence-transformers), through ``projection`` when ``projection_size`` is set, L2-normalised
with ``normalize``, so that a dot product is the cosine similarity (what the losses score and what
x-script build_index searches with inner products). A sentence-transformers folder as pretrained_model
(xdpx/models/st_folder.py) gives the encoder's weights and the defaults of pooling and normalize, so that the
model before training embeds as ``SentenceTransformer(folder).encode``; options that contradict it are refused.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import at_least
from xdpx.models.heads import heads
from xdpx.models.parts import Encoder, Head, Text, exporting
from xdpx.models.st_folder import STFolder, read_st_folder

TEXT_FIELDS = ("tokens1", "tokens2", "tokens3")
NORMALIZE = Option("normalize", bool, default=lambda a: _folder(a).normalize if _folder(a) is not None else True,
                   default_doc="true (a sentence-transformers pretrained_model: whether it has a Normalize module)",
                   doc="L2-normalise the embeddings (a dot product is then the cosine similarity: what the "
                       "losses score and what x-script build_index searches by); false: raw pooled vectors")


def _folder(args: Any) -> STFolder | None:
    return read_st_folder(args.get("pretrained_model"))


# a sentence-transformers folder as pretrained_model (xdpx/models/st_folder.py): what the bi-encoder cannot
# reproduce, and options that contradict the folder, are refused (the folder's values are the defaults)
ST_FOLDER_RULES = [
    Rule(lambda a: _folder(a) is None or _folder(a).problem is None,
         lambda a: f"pretrained_model {a.pretrained_model}: a sentence-transformers folder whose embeddings a "
                   f"bi-encoder cannot reproduce: {_folder(a).problem}", keys=("pretrained_model",)),
    Rule(lambda a: _folder(a) is None or _folder(a).pooling is None or a.pooling == _folder(a).pooling,
         lambda a: f"pooling: {a.pooling} contradicts pretrained_model's sentence-transformers folder, which pools "
                   f"by {_folder(a).pooling}: remove pooling (the folder's is the default) or set pooling: "
                   f"{_folder(a).pooling}", keys=("pooling",)),
    Rule(lambda a: _folder(a) is None or a.normalize == _folder(a).normalize,
         lambda a: f"normalize: {str(a.normalize).lower()} contradicts pretrained_model's sentence-transformers "
                   f"folder, which {'has a' if _folder(a).normalize else 'has no'} Normalize module: remove "
                   "normalize (the folder's is the default)", keys=("normalize",)),
    Rule(lambda a: _folder(a) is None or not _folder(a).max_seq_length or not a.get("max_len")
         or a.max_len <= _folder(a).max_seq_length,
         lambda a: f"max_len (from x-prepro) {a.max_len} exceeds the max_seq_length {_folder(a).max_seq_length} of "
                   "pretrained_model's sentence-transformers folder, which cuts longer texts there: prepare the "
                   f"data with max_len: {_folder(a).max_seq_length} or less", keys=("max_len",)),
]


@heads.register("bi_encoder")
class BiEncoderHead(Head):
    """One shared encoder embeds each text field; ``[B, K, D]`` embeddings."""

    options = [
        Option("projection_size", int, default=None, validate=at_least(1),
               doc="a linear projection of the sentence vector to this width (null: the vector as pooled)"),
        NORMALIZE,
        *ST_FOLDER_RULES,
    ]
    needs = "texts"
    pooling_default = "mean"

    def reads_first_token_only(self) -> bool:
        return self.encoder.reads_first_token_only()

    def __init__(self, args: Any, encoder: Encoder) -> None:
        super().__init__(args, encoder)
        size = args.get("projection_size")
        self.projection = self.add("projection", nn.Linear(encoder.width, int(size))) if size else None

    def embed(self, text: Text, first_token_only: bool = False) -> torch.Tensor:
        """``[N, D]`` sentence vectors of a batch of texts (before normalisation)."""
        vectors = self.encoder.pool(self.encoder.encode(text, first_token_only), text)
        return self.projection(vectors) if self.projection is not None else vectors

    def forward(self, net_input: dict[str, Any], perturb: Any = None, first_token_only: bool = False) -> torch.Tensor:
        given = [net_input[name] for name in TEXT_FIELDS if net_input.get(name) is not None]
        if not given:
            raise ValueError("a bi-encoder needs tokens1 (and tokens2 / tokens3 for pairs and triplets)")
        pad = self.encoder.pad_index
        if len(given) == 1 or exporting():  # each field on its own: no width computed from the data
            vectors = torch.cat([self.embed(Text(t, t.ne(pad).long()), first_token_only) for t in given])
        else:
            width = max(t.size(1) for t in given)
            ids = torch.cat([F.pad(t, (0, width - t.size(1)), value=pad) for t in given])
            vectors = self.embed(Text(ids, ids.ne(pad).long()), first_token_only)
        if self.args.normalize:
            vectors = F.normalize(vectors.float(), dim=-1).to(vectors.dtype)
        return vectors.view(len(given), given[0].size(0), -1).transpose(0, 1)
