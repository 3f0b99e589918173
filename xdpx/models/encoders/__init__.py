"""Encoder families, one file each, in the registry ``encoders``: text -> per-token states and a sentence
vector (the interface: :class:`xdpx.models.parts.Encoder`). Built-ins load on the first lookup."""

from xdpx.registry import Registry

encoders = Registry("encoder", modules=("xdpx.models.encoders.bert", "xdpx.models.encoders.hf",
                                        "xdpx.models.encoders.cnn", "xdpx.models.encoders.lstm"))
