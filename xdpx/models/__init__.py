"""Models: ``models.get(args.model).build(args)`` returns an ``nn.Module``.

``model(**batch['net_input'])`` returns logits ``[B, num_classes]``, or ``[B]`` for regression.
The built-in families are imported on the first lookup, never at ``import xdpx`` time.
"""

from xdpx.registry import Registry

models = Registry(
    "model",
    modules=(
        "xdpx.models.cnn",
        "xdpx.models.lstm",
        "xdpx.models.match_cnn",
        "xdpx.models.re2",
        "xdpx.models.bert",
        "xdpx.models.bert_mlm",
        "xdpx.models.hf_encoder",
        "xdpx.models.ner",
        "xdpx.models.bi_encoder",
    ),
)
