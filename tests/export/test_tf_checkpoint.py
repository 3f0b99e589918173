"""TF BERT checkpoints: read one written by TensorFlow's Saver under Google's names, write one back."""

from __future__ import annotations

import numpy as np
import pytest
from tf_helpers import LAYERS, google_bert_variables, save_with_tf_saver

from xdpx.cli import UserError

pytestmark = pytest.mark.tf


@pytest.fixture
def tf():
    return pytest.importorskip("tensorflow")


def test_reads_a_checkpoint_written_by_tf_saver_into_hf_names(tf, tmp_path):
    from xdpx.models.tf_checkpoint import read_tf_bert_checkpoint

    variables = google_bert_variables(vocab_size=30, num_labels=3, mlm=True)
    prefix = save_with_tf_saver(variables, tmp_path)
    weights = read_tf_bert_checkpoint(str(prefix))
    # every model variable arrives; optimizer slots and global_step do not; tied MLM names are added
    expected = len(variables) + 2
    assert len(weights) == expected
    assert not [k for k in weights if "adam" in k or "step" in k]
    q = "bert.encoder.layer.1.attention.self.query.weight"
    np.testing.assert_array_equal(weights[q], variables["bert/encoder/layer_1/attention/self/query/kernel"].T)
    np.testing.assert_array_equal(weights["bert.encoder.layer.0.intermediate.dense.weight"],
                                  variables["bert/encoder/layer_0/intermediate/dense/kernel"].T)
    assert weights["bert.encoder.layer.0.output.dense.weight"].shape == (16, 32)
    np.testing.assert_array_equal(weights["bert.embeddings.LayerNorm.weight"], variables["bert/embeddings/LayerNorm/gamma"])
    np.testing.assert_array_equal(weights["classifier.weight"], variables["output_weights"])  # [labels, hidden]
    np.testing.assert_array_equal(weights["cls.seq_relationship.weight"], variables["cls/seq_relationship/output_weights"])
    np.testing.assert_array_equal(weights["cls.predictions.decoder.weight"], variables["bert/embeddings/word_embeddings"])
    np.testing.assert_array_equal(weights["cls.predictions.bias"], variables["cls/predictions/output_bias"])
    assert {k for k in weights if k.startswith("bert.encoder.layer.")} == {
        k for k in weights if k.startswith("bert.encoder.layer.") and int(k.split(".")[3]) < LAYERS}
    # the folder works as well as the prefix (its 'checkpoint' file names the prefix)
    from_dir = read_tf_bert_checkpoint(str(tmp_path))
    assert from_dir.keys() == weights.keys() and all(np.array_equal(from_dir[k], weights[k]) for k in weights)


def test_written_checkpoint_has_google_names_and_round_trips(tf, tmp_path):
    from xdpx.models.tf_checkpoint import read_tf_bert_checkpoint, write_tf_bert_checkpoint

    variables = google_bert_variables(vocab_size=30, num_labels=2, mlm=True)
    weights = read_tf_bert_checkpoint(str(save_with_tf_saver(variables, tmp_path)))
    prefix = write_tf_bert_checkpoint(weights, str(tmp_path / "b"))
    assert prefix == str(tmp_path / "b" / "bert_model.ckpt")
    reader = tf.train.load_checkpoint(prefix)  # TensorFlow's own reader sees Google's names and layouts
    assert set(reader.get_variable_to_shape_map()) == set(variables)
    for name, value in variables.items():
        np.testing.assert_array_equal(reader.get_tensor(name), value)
    again = read_tf_bert_checkpoint(str(tmp_path / "b"))
    assert again.keys() == weights.keys() and all(np.array_equal(again[k], weights[k]) for k in weights)


def test_missing_or_ambiguous_checkpoint_is_a_clear_error(tf, tmp_path):
    from xdpx.models.tf_checkpoint import read_tf_bert_checkpoint, write_tf_bert_checkpoint

    with pytest.raises(UserError, match=r"bert_model.ckpt.index does not exist"):
        read_tf_bert_checkpoint(str(tmp_path / "bert_model.ckpt"))
    (tmp_path / "x.index").write_text("")
    (tmp_path / "y.index").write_text("")
    with pytest.raises(UserError, match=r"no TF checkpoint found .*found x, y"):
        read_tf_bert_checkpoint(str(tmp_path))
    with pytest.raises(ValueError, match=r"no TF BERT name: \['embedding.weight'\]"):
        write_tf_bert_checkpoint({"embedding.weight": np.zeros((2, 2), np.float32)}, str(tmp_path / "out"))
