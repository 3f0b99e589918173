"""The memory-mapped format round trip, open_split, and processors' collate/encode/decode."""

from __future__ import annotations

import numpy as np
import pytest
from data_helpers import CHINESE_VOCAB

from xdpx.config.options import Args
from xdpx.data import processors
from xdpx.data.dataset import open_split
from xdpx.data.indexed import IndexedArray, IndexedWriter, ScalarWriter, narrowest_dtype


def test_narrowest_dtype_follows_the_vocabulary_size():
    assert [narrowest_dtype(n) for n in (256, 257, 65536, 65537)] == ["uint8", "uint16", "uint16", "int32"]


def test_indexed_round_trip_and_open_split(tmp_path):
    rng = np.random.default_rng(0)
    samples = [rng.integers(0, 300, rng.integers(0, 9)) for _ in range(50)]
    writer = IndexedWriter(str(tmp_path / "train.tokens"), narrowest_dtype(300))
    for start in range(0, 50, 7):  # several chunks
        chunk = samples[start: start + 7]
        writer.add_many(np.concatenate(chunk), [len(s) for s in chunk])
    writer.close()
    for name, values, dtype in (("target", np.arange(50) % 3, "int64"), ("id", np.arange(50), "int64")):
        scalars = ScalarWriter(str(tmp_path / f"train.{name}"), dtype)
        scalars.add_many(values)
        scalars.close()
    array = IndexedArray(str(tmp_path / "train.tokens"))
    assert array.dtype == np.uint16 and len(array) == 50
    assert all(np.array_equal(array[i], s) for i, s in enumerate(samples))
    ds = open_split(str(tmp_path), "train")
    assert len(ds) == 50 and ds[4]["target"] == 1 and ds[4]["id"] == 4
    assert np.array_equal(ds[7]["tokens"], samples[7])
    assert list(ds.sizes) == [len(s) for s in samples]
    with pytest.raises(FileNotFoundError, match="available: train"):
        open_split(str(tmp_path), "dev")


def make_processor(tmp_path, name, **extra):
    (tmp_path / "vocab.txt").write_text(CHINESE_VOCAB.read_text())
    (tmp_path / "target_map.txt").write_text("neg\npos\n")
    values = dict(processor=name, tokenizer="bert", max_len=8, min_len=1, pad_word="[PAD]", unk_word="[UNK]",
                  lower=True, target_type="text", cls_word="[CLS]", sep_word="[SEP]", data_dir=str(tmp_path),
                  seed=1)
    values.update(extra)
    return processors.get(name)(Args(values, {}, set(), {}))


def test_bert_pair_encode_truncates_longest_first_and_collates_token_types(tmp_path):
    processor = make_processor(tmp_path, "bert_pair")
    sample = processor.encode(["今天天气很好啊", "好"], label="pos")
    assert processor.decode(sample) == "[CLS] 今 天 天 气 [SEP] 好 [SEP]"
    assert sample["target"] == 1
    batch = processor.collate([sample, {**processor.encode(["好", "坏"]), "target": 0}])
    net = batch["net_input"]
    assert net["input_ids"].shape == (2, 8) and net["token_type_ids"][0].tolist() == [0] * 6 + [1] * 2
    assert net["attention_mask"][1].tolist() == [1] * 5 + [0] * 3
    assert batch["target"].tolist() == [1, 0] and batch["nsamples"] == 2


def test_bert_lm_masks_depend_on_seed_epoch_and_id_only(tmp_path):
    processor = make_processor(tmp_path, "bert_lm", mask_word="[MASK]", mask_prob=0.3, random_token_prob=0.1,
                               leave_unmasked_prob=0.1, mask_whole_words=False, max_len=64)
    ids = processor.encode("人民日报社论指出改革开放是决定当代中国命运的关键抉择必须坚定不移")["input_ids"]
    samples = [{"input_ids": ids, "id": 3}, {"input_ids": ids, "id": 4}]
    first = processor.collate(samples)
    again = processor.collate(list(reversed(samples)))
    assert first["target"][0].tolist() == again["target"][1].tolist()  # same (seed, epoch, id): same mask
    assert first["target"][0].tolist() != first["target"][1].tolist()
    masked = first["target"][0] != -100
    assert 0 < masked.sum() <= 0.5 * len(ids) and not masked[0] and not masked[len(ids) - 1]
    assert (first["target"][0][masked] == first["target"].new_tensor(ids.astype(np.int64))[masked]).all()
    processor.set_epoch(1)
    assert processor.collate(samples)["target"][0].tolist() != first["target"][0].tolist()
