"""Data: raw text -> parser -> loader -> tokenizer -> processor -> memory-mapped splits (x-prepro),
and back: splits -> dataset -> processor.collate -> batches (x-train).

The four component registries live here. Their modules are imported on the first lookup, so importing
``xdpx.data`` imports neither torch nor tokenizers (invariant 9 of docs/architecture.md). The contract other parts code
against is in docs/architecture.md ("Data contract") and docs/prepro.md.
"""

from __future__ import annotations

from xdpx.registry import Registry

parsers = Registry("parser", modules=("xdpx.data.parsing", "xdpx.data.tables", "xdpx.data.ner_reading"))
loaders = Registry("loader", modules=("xdpx.data.loading", "xdpx.data.mixing", "xdpx.data.distill_data",
                                        "xdpx.data.ner_reading", "xdpx.data.bi_encoder_processing"))
tokenizers = Registry("tokenizer", modules=("xdpx.data.tokenizing", "xdpx.data.ner_reading"))
processors = Registry("processor", modules=("xdpx.data.processing", "xdpx.data.bert_processing",
                                              "xdpx.data.distill_data", "xdpx.data.ner_processing",
                                              "xdpx.data.hf_processing", "xdpx.data.bi_encoder_processing"))

__all__ = ["loaders", "parsers", "processors", "tokenizers"]
