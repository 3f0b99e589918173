"""Loading pretrained BERT weights: the real all-MiniLM-L6-v2, Hugging Face directories in both
formats, remote paths, name variants, and the errors a user can fix."""

from __future__ import annotations

import pytest
import torch

from tests.bert.bert_helpers import batch, build, minilm_dir
from xdpx.cli import UserError


def test_real_minilm_matches_transformers_bert_model():
    transformers = pytest.importorskip("transformers")
    path = minilm_dir()
    from tests.bert.bert_helpers import ROOT
    from xdpx.config.options import resolve
    from xdpx.models import models

    # no size option given: the architecture comes from the directory's config.json
    args = resolve({"model": "bert_classification", "pretrained_model": path, "vocab_size": 30522,
                    "num_classes": 2}, ROOT, "test")
    assert (args.hidden_size, args.num_hidden_layers, args.intermediate_size) == (384, 6, 1536)
    torch.manual_seed(0)
    model = models.get("bert_classification").build(args)
    logged = []
    model.load_pretrained(path, logged.append)
    assert "missing keys (left at their initial values): ['classifier.weight', 'classifier.bias']" in logged[0]
    assert "unexpected" not in logged[0]
    reference = transformers.BertModel.from_pretrained(path).eval()
    model.eval()
    inputs = batch(vocab=30522, lengths=(17, 9, 33, 4), seed=3)
    with torch.no_grad():
        ours, pooled = model.bert(**inputs)
        theirs = reference(**inputs)
    real = inputs["attention_mask"].bool()
    assert (ours[real] - theirs.last_hidden_state[real]).abs().max() < 1e-5
    assert (pooled - theirs.pooler_output).abs().max() < 1e-5


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory):
    """A tiny transformers BertForMaskedLM saved by save_pretrained (safetensors)."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(5)
    config = transformers.BertConfig(vocab_size=120, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                     intermediate_size=48, max_position_embeddings=64, hidden_act="gelu_new")
    model = transformers.BertForMaskedLM(config).eval()
    path = tmp_path_factory.mktemp("hf") / "tiny-bert"
    model.save_pretrained(path)
    return path, model


def _resolved(model_name, path, **config):
    from tests.bert.bert_helpers import ROOT
    from xdpx.config.options import resolve

    return resolve({"model": model_name, "pretrained_model": str(path), **config}, ROOT, "test")


def test_hf_directory_gives_architecture_and_weights(hf_dir):
    path, reference = hf_dir
    from xdpx.models import models

    args = _resolved("bert_lm", path, loss="mlm", major_metric="mlm_accuracy")
    assert (args.hidden_size, args.hidden_act, args.num_hidden_layers) == (32, "gelu_new", 2)
    model = models.get("bert_lm").build(args)
    logged = []
    model.load_pretrained(str(path), logged.append)
    assert "no missing keys" in logged[0]
    inputs = batch()
    with torch.no_grad():
        expected = reference(**inputs).logits
        got = model.eval()(**inputs)
    torch.testing.assert_close(got[inputs["attention_mask"].bool()], expected[inputs["attention_mask"].bool()],
                               atol=1e-5, rtol=1e-5)


def test_pytorch_model_bin_remote_path_and_old_names(hf_dir, tmp_path):
    """pytorch_model.bin with a bare BertModel's keys and gamma/beta names, read from memory://."""
    from xdpx import io
    from xdpx.models import models

    path, reference = hf_dir
    state = {k[len("bert."):]: v for k, v in reference.state_dict().items() if k.startswith("bert.")}
    state = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
             for k, v in state.items()}
    remote = "memory://bert-test/old"
    io.makedirs(remote)
    io.copy(str(path / "config.json"), io.join(remote, "config.json"))
    with io.open(io.join(remote, "pytorch_model.bin"), "wb") as f:
        torch.save(state, f)
    args = _resolved("bert_classification", remote, num_classes=2)
    model = models.get("bert_classification").build(args)
    logged = []
    model.load_pretrained(remote, logged.append)
    assert ("missing keys (left at their initial values): ['bert.pooler.dense.weight', 'bert.pooler.dense.bias', "
            "'classifier.weight', 'classifier.bias']") in logged[0]  # an MLM model has no pooler
    torch.testing.assert_close(model.bert.encoder.layer[1].output.LayerNorm.weight,
                               reference.bert.encoder.layer[1].output.LayerNorm.weight)


def test_unexpected_keys_are_logged_and_shape_errors_name_the_key(hf_dir):
    from xdpx.models import models

    path, _ = hf_dir
    model = models.get("bert_classification").build(_resolved("bert_classification", path, num_classes=2))
    logged = []
    model.load_pretrained(str(path), logged.append)
    assert "unexpected keys (ignored): ['cls.predictions" in logged[0]
    wrong = build(vocab_size=99)  # the vocabulary of other data
    # what differs is named: the number of tokens (a vocab.txt one line longer blamed the tokenizer before)
    with pytest.raises(UserError, match=r"its vocabulary has 120 tokens, the data's vocab.txt 99 \(vocab_size"):
        wrong.load_pretrained(str(path))
    with pytest.raises(UserError, match=r"shapes differ: .*bert.encoder.layer.0.intermediate.dense.weight \(48, 32\) "
                                         r"vs ours \(40, 32\).*must match the pretrained model"):
        build(vocab_size=120, intermediate_size=40).load_pretrained(str(path))


def test_a_directory_without_weights_and_a_foreign_file(tmp_path):
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(UserError, match="none of model.safetensors, pytorch_model.bin"):
        build().load_pretrained(str(tmp_path))
    torch.save({"encoder.conv.weight": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(UserError, match="no parameter name matches this model"):
        build().load_pretrained(str(tmp_path / "other.pt"))


@pytest.mark.tf
def test_from_tf_reads_a_tf_written_checkpoint_with_its_bert_config(tmp_path):
    """A TF checkpoint (written by TensorFlow under Google's names) and bert_config.json beside it:
    from_tf: true gives the architecture and the encoder of the source model."""
    pytest.importorskip("tensorflow")
    import json

    from xdpx.models import models
    from xdpx.models.tf_checkpoint import write_tf_bert_checkpoint

    source = build(model="bert_lm", loss="mlm", major_metric="mlm_accuracy", hidden_act="relu").eval()
    prefix = write_tf_bert_checkpoint(source.state_dict(), str(tmp_path))
    (tmp_path / "bert_config.json").write_text(json.dumps(source.hf_config()))
    args = _resolved("bert_classification", prefix, from_tf=True, num_classes=2)
    assert (args.hidden_size, args.hidden_act) == (32, "relu")
    model = models.get("bert_classification").build(args)
    logged = []
    model.load_pretrained(prefix, logged.append)
    assert "unexpected keys (ignored): ['cls.predictions" in logged[0] and "'bert.embeddings" not in logged[0]
    inputs = batch()
    with torch.no_grad():
        ours, _ = model.eval().bert(**inputs)
        expected, _ = source.bert(**inputs)
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-6)
