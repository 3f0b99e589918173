"""Heads, one file each, in the registry ``heads``: an encoder's states -> a task's outputs (the interface:
:class:`xdpx.models.parts.Head`). Built-ins load on the first lookup."""

from xdpx.registry import Registry

heads = Registry("head", modules=("xdpx.models.heads.classification", "xdpx.models.heads.siamese",
                                  "xdpx.models.heads.tagging", "xdpx.models.heads.bi_encoder",
                                  "xdpx.models.heads.mlm", "xdpx.models.heads.pretrain"))
