"""Models: an encoder and a head (xdpx/models/composed.py), or a whole pair-interaction model (re2,
match_cnn). Three registries (one idiom, xdpx/registry.py):

- ``encoders`` (xdpx.models.encoders): text -> per-token states and a sentence vector (xdpx/models/encoders/, one file each);
- ``heads`` (xdpx.models.heads): those -> a task's outputs (xdpx/models/heads/, one file each);
- ``models``: names that stand for a whole model: the manual's and every earlier release's names
  (``bert_classification``, ``cls_cnn``, ``bert_ner``, ...), each an alias of an encoder and a head
  (xdpx/models/aliases.py), and the pair-interaction models.

A config names ``model: <name>``, or ``encoder: <family>`` and ``head: <kind>``. The built model's
``forward(**batch['net_input'])`` returns the head's outputs (logits ``[B, num_classes]``, ``[B]`` for
regression, tag scores ``[B, T, C]``, embeddings ``[B, K, D]``...). Built-ins load on the first lookup.
"""

from xdpx.registry import Registry

models = Registry("model", modules=("xdpx.models.aliases", "xdpx.models.match_cnn", "xdpx.models.re2"))
