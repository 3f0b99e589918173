"""Data: raw text -> parser -> loader -> tokenizer -> processor -> memory-mapped splits (x-prepro),
and back: splits -> dataset -> processor.collate -> batches (x-train).

The four component registries live here. Their modules are imported on the first lookup, so importing
``xdpx.data`` imports neither torch nor tokenizers (invariant 9 of docs/architecture.md). The contract other parts code
against is in docs/architecture.md ("Data contract") and docs/prepro.md.
"""

from __future__ import annotations

from xdpx.registry import Registry

parsers = Registry("parser", modules=("xdpx.data.parsing", "xdpx.data.tables"))
loaders = Registry("loader", modules=("xdpx.data.loading", "xdpx.data.mixing"))
tokenizers = Registry("tokenizer", modules=("xdpx.data.tokenizing",))
processors = Registry("processor", modules=("xdpx.data.processing", "xdpx.data.bert_processing"))

__all__ = ["loaders", "parsers", "processors", "tokenizers"]
