"""BERT processors: [CLS] text [SEP] (single), [CLS] a [SEP] b [SEP] with token types (pair), and
blocks of running text for masked-language-model pretraining (bert_lm), masked at collate time."""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option
from xdpx.data import processors
from xdpx.data.processing import IGNORE_INDEX, Processor

SPECIAL_OPTIONS = [
    Option("cls_word", str, default="[CLS]", doc="the classification token that starts every sample"),
    Option("sep_word", str, default="[SEP]", doc="the separator token that ends every text"),
]


class BertProcessor(Processor):
    """Shared parts: special token ids, collate into input_ids / token_type_ids / attention_mask."""

    options = SPECIAL_OPTIONS
    fields = ("input_ids", "token_type_ids")
    field_dtypes = {"token_type_ids": "uint8"}

    @classmethod
    def special_words(cls, args: Any) -> list[str]:
        return [args.cls_word, args.sep_word]

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        super().__init__(args, data_dir)
        indices = {w: self.dictionary.special_index(w) for w in self.special_words(args)}
        missing = [w for w, i in indices.items() if i is None]
        if missing:
            raise ValueError(f"the vocabulary lacks {missing}: check cls_word / sep_word / mask_word")
        self.cls_index, self.sep_index = indices[args.cls_word], indices[args.sep_word]

    def join(self, parts: list[Any]) -> dict[str, Any]:
        import numpy as np

        cls, sep = [self.cls_index], [self.sep_index]
        if len(parts) == 1:  # the common case, kept to one concatenate
            ids = np.concatenate((cls, parts[0], sep))
            return {"input_ids": ids, "token_type_ids": np.zeros(len(ids), dtype=np.int64)}
        a, b = parts
        ids = np.concatenate((cls, a, sep, b, sep))
        types = np.zeros(len(ids), dtype=np.int64)
        types[len(a) + 2:] = 1
        return {"input_ids": ids, "token_type_ids": types}

    def decode(self, sample: dict[str, Any]) -> str:
        return " ".join(self.dictionary.string(sample["input_ids"]))

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        input_ids = self.pad([s["input_ids"] for s in samples])
        net_input = {"input_ids": input_ids,
                     "token_type_ids": self.pad([s["token_type_ids"] for s in samples], pad_value=0),
                     "attention_mask": (self.pad([[1] * len(s["input_ids"]) for s in samples], pad_value=0))}
        return {"net_input": net_input, "target": self.collate_targets(samples),
                "id": torch.tensor([s["id"] for s in samples], dtype=torch.long),
                "nsamples": len(samples), "ntokens": int(sum(len(s["input_ids"]) for s in samples))}


@processors.register("bert_single")
class BertSingleProcessor(BertProcessor):
    """One text -> [CLS] text [SEP] (max_len counts the two special tokens)."""

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        room = self.max_len - 2
        return self.join([ids[0][:room]]), len(ids[0]) > room


@processors.register("bert_pair")
class BertPairProcessor(BertProcessor):
    """Two texts -> [CLS] a [SEP] b [SEP], token types 0 then 1; the longer text is cut first."""

    num_texts = 2

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        a, b = len(ids[0]), len(ids[1])
        room = self.max_len - 3
        cut = a + b > room
        while a + b > room:  # longest first, as BERT does
            if a >= b:
                a -= 1
            else:
                b -= 1
        return self.join([ids[0][:a], ids[1][:b]]), cut


@processors.register("bert_lm")
class BertLMProcessor(BertProcessor):
    """Blocks of up to max_len tokens ([CLS] ... [SEP]) from a corpus (loader: corpus, whose break_mode
    says how lines fill blocks). Masks are drawn at collate time from (seed, epoch, sample id): each
    epoch masks differently, reproducibly. Targets are the original ids at masked positions, -100 elsewhere.
    """

    options = [
        *SPECIAL_OPTIONS,
        Option("mask_word", str, default="[MASK]", doc="the token that replaces masked tokens"),
        Option("mask_prob", float, default=0.15, validate=lambda p: 0 < p < 1, validate_msg="between 0 and 1",
               doc="share of tokens (or whole words) to predict"),
        Option("random_token_prob", float, default=0.1, doc="of the predicted tokens, share replaced by a random token"),
        Option("leave_unmasked_prob", float, default=0.1, doc="of the predicted tokens, share left unchanged"),
        Option("mask_whole_words", bool, default=False,
               doc="mask all the WordPiece pieces of a word together (pieces after the first start with ##)"),
    ]
    fields = ("input_ids",)
    field_dtypes = {}
    is_corpus = True

    @classmethod
    def special_words(cls, args: Any) -> list[str]:
        return [args.cls_word, args.sep_word, args.mask_word]

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        import numpy as np

        super().__init__(args, data_dir)
        self.mask_index = self.dictionary.special_index(args.mask_word)
        self.continuation = np.array([t.startswith("##") for t in self.dictionary.tokens], dtype=bool)

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        import numpy as np

        room = self.max_len - 2
        block = ids[0][:room]
        return {"input_ids": np.concatenate([[self.cls_index], block, [self.sep_index]])}, len(ids[0]) > room

    def assembler(self, break_mode: str) -> BlockAssembler:
        return BlockAssembler(self, break_mode)

    def mask(self, ids: Any, sample_id: int) -> tuple[Any, Any]:
        import numpy as np

        rng = np.random.default_rng([self.seed, self.epoch, int(sample_id)])
        ids = np.array(ids, dtype=np.int64)
        positions = np.arange(1, len(ids) - 1)  # never [CLS] / [SEP]
        if self.args.mask_whole_words:
            starts = positions[~self.continuation[ids[positions]]]
            if len(starts) == 0 or starts[0] != 1:
                starts = np.concatenate([[1], starts])
            units = np.split(positions, np.searchsorted(positions, starts[1:]))
        else:
            units = [positions[i: i + 1] for i in range(len(positions))]
        target = np.full(len(ids), IGNORE_INDEX, dtype=np.int64)
        count = min(len(units), int(self.args.mask_prob * len(units) + rng.random()))
        if count == 0:
            return ids, target
        chosen = np.sort(np.concatenate([units[i] for i in rng.choice(len(units), count, replace=False)]))
        target[chosen] = ids[chosen]
        roll = rng.random(len(chosen))
        random_share, keep_share = self.args.random_token_prob, self.args.leave_unmasked_prob
        masked = chosen[roll < 1 - random_share - keep_share]
        randomized = chosen[(roll >= 1 - random_share - keep_share) & (roll < 1 - keep_share)]
        ids[masked] = self.mask_index
        ids[randomized] = rng.integers(0, len(self.dictionary), len(randomized))
        return ids, target

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        batch = super().collate([{**s, "token_type_ids": [0] * len(s["input_ids"])} for s in samples])
        masked = [self.mask(s["input_ids"], s["id"]) for s in samples]
        batch["net_input"]["input_ids"] = self.pad([m[0] for m in masked])
        batch["target"] = self.pad([m[1] for m in masked], pad_value=IGNORE_INDEX)
        return batch


class BlockAssembler:
    """Turns the stream of tokenized lines (``None`` = document end) into blocks of max_len - 2 ids."""

    def __init__(self, processor: BertLMProcessor, break_mode: str) -> None:
        self.processor, self.mode = processor, break_mode
        self.room = processor.max_len - 2
        self.current: list[Any] = []
        self.size = 0

    def _emit(self) -> list[Any]:
        import numpy as np

        if not self.current:
            return []
        block = np.concatenate(self.current)
        self.current, self.size = [], 0
        return [block]

    def feed(self, ids: Any) -> list[Any]:
        """Blocks completed by this line (``ids``), or by a document end (``ids is None``)."""
        if ids is None:
            return self._emit() if self.mode == "complete_doc" else []
        if len(ids) == 0:
            return []
        if self.mode == "eos":
            return [ids[: self.room]]
        out = []
        if self.mode == "none":
            while len(ids):
                take = self.room - self.size
                self.current.append(ids[:take])
                self.size += len(ids[:take])
                ids = ids[take:]
                if self.size == self.room:
                    out += self._emit()
            return out
        if self.size + len(ids) > self.room:
            out += self._emit()
        while len(ids) > self.room:  # a line longer than a block fills blocks of its own
            out.append(ids[: self.room])
            ids = ids[self.room:]
        self.current.append(ids)
        self.size += len(ids)
        return out

    def flush(self) -> list[Any]:
        return self._emit()
