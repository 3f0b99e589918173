"""BERT processors: [CLS] text [SEP] (single), [CLS] a [SEP] b [SEP] with token types (pair), and
blocks of running text for masked-language-model pretraining (bert_lm), masked at collate time."""

from __future__ import annotations

from typing import Any

from xdpx.config.options import Option, Rule
from xdpx.config.ranges import in_range
from xdpx.data import processors
from xdpx.data.hf_tokens import special_token_default
from xdpx.data.processing import IGNORE_INDEX, Processor
from xdpx.utils.optional import require

SPECIAL_OPTIONS = [
    Option("cls_word", str, default=special_token_default("cls_token", "[CLS]"),
           default_doc="[CLS] (with tokenizer: auto, the cls_token of tokenizer_dir's tokenizer_config.json)",
           doc="the classification token that starts every sample (<s> for RoBERTa and XLM-R)"),
    Option("sep_word", str, default=special_token_default("sep_token", "[SEP]"),
           default_doc="[SEP] (with tokenizer: auto, the sep_token of tokenizer_dir's tokenizer_config.json)",
           doc="the separator token that ends every text (</s> for RoBERTa and XLM-R)"),
]


def pad_multiple(args: Any) -> int:
    """8 under fp16/bf16 on a GPU, whose tensor cores want lengths in multiples of 8; 1 otherwise. On the
    CPU the rounding adds 13% padded tokens to MiniLM's length-bucketed batches for no faster kernels
    (docs/benchmarks.md). The choice depends on the run's options and the machine only, so a resumed run
    pads as the run it continues."""
    if not (args.get("fp16") or args.get("bf16")) or args.get("cpu"):
        return 1
    import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

    return 8 if torch.cuda.is_available() else 1


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
        self.pad_multiple = pad_multiple(args)
        indices = {w: self.dictionary.special_index(w) for w in self.special_words(args)}
        missing = [w for w, i in indices.items() if i is None]
        if missing:
            raise ValueError(f"the vocabulary lacks {missing}: check cls_word / sep_word / mask_word")
        self.cls_index, self.sep_index = indices[args.cls_word], indices[args.sep_word]

    def join(self, parts: list[Any]) -> dict[str, Any]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

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

    def pad(self, arrays: list[Any], pad_value: int | None = None) -> Any:
        """Pad to the longest sample, rounded up to pad_multiple (8 under fp16/bf16 on a GPU)."""
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

        padded = super().pad(arrays, pad_value)
        extra = -padded.size(1) % self.pad_multiple
        if extra:
            fill = self.pad_index if pad_value is None else pad_value
            padded = torch.nn.functional.pad(padded, (0, extra), value=fill)
        return padded

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        import torch  # lazy: torch is heavy; x-prepro (and its --dry) starts without it

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
        Option("mask_prob", float, default=0.15, validate=in_range(0, 1, low_open=True, high_open=True),
               doc="share of tokens (or whole words) to predict"),
        Option("random_token_prob", float, default=0.1, validate=in_range(0, 1),
               doc="of the predicted tokens, share replaced by a random token"),
        Option("leave_unmasked_prob", float, default=0.1, validate=in_range(0, 1),
               doc="of the predicted tokens, share left unchanged"),
        Option("mask_whole_words", bool, default=False,
               doc="mask all the pieces of a word together: WordPiece pieces after the first start with ##; "
                   "with word_segmenter: jieba, runs of Chinese characters are cut into jieba words too",
               children={True: [Option(
                   "word_segmenter", str, default="wordpiece", choices=("wordpiece", "jieba"),
                   doc="what a whole word is: wordpiece (## continuations, for English) or jieba (Chinese "
                       "words found by jieba in runs of single-character tokens, plus ## continuations; "
                       "needs pip install jieba)")]}),
        Rule(lambda a: a.random_token_prob + a.leave_unmasked_prob <= 1,
             "random_token_prob + leave_unmasked_prob must be <= 1: both are shares of the predicted tokens",
             keys=("random_token_prob", "leave_unmasked_prob")),
    ]
    fields = ("input_ids",)
    field_dtypes = {}
    is_corpus = True

    @classmethod
    def special_words(cls, args: Any) -> list[str]:
        return [args.cls_word, args.sep_word, args.mask_word]

    def __init__(self, args: Any, data_dir: str | None = None) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        super().__init__(args, data_dir)
        self.mask_index = self.dictionary.special_index(args.mask_word)
        self.continuation = np.array([t.startswith("##") for t in self.dictionary.tokens], dtype=bool)
        self.words = ChineseWords(self.dictionary.tokens) \
            if args.mask_whole_words and args.get("word_segmenter") == "jieba" else None

    specials = 2  # [CLS] block [SEP]

    @property
    def block_room(self) -> int:
        """Token ids per block, leaving room for the special tokens."""
        return self.max_len - self.specials

    def build_sample(self, ids: list[Any]) -> tuple[dict[str, Any], bool]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        room = self.block_room
        block = ids[0][:room]
        return {"input_ids": np.concatenate([[self.cls_index], block, [self.sep_index]])}, len(ids[0]) > room

    def assembler(self, break_mode: str) -> BlockAssembler:
        return BlockAssembler(self, break_mode)

    def mask(self, ids: Any, sample_id: int) -> tuple[Any, Any]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        rng = np.random.default_rng([self.seed, self.epoch, int(sample_id)])
        ids = np.array(ids, dtype=np.int64)
        positions = np.arange(1, len(ids) - 1)  # never [CLS] / [SEP] at the ends
        positions = positions[ids[positions] != self.sep_index]  # nor a [SEP] between segments
        if self.args.mask_whole_words:
            continuation = self.continuation[ids[positions]]
            if self.words is not None:
                continuation |= self.words.continuation(ids[positions])
            continuation[np.flatnonzero(np.diff(positions) > 1) + 1] = False  # a word never spans a [SEP]
            starts = np.flatnonzero(~continuation)
            units = np.split(positions, starts[starts > 0])
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


@processors.register("bert_pretrain")
class BertPretrainProcessor(BertLMProcessor):
    """bert_lm's blocks as two segments for sentence-order prediction (ALBERT's SOP, model bert_pretrain):
    at collate time each block is cut at a point drawn from (seed, epoch, sample id) into A and B, kept
    in order or swapped with probability 1/2: [CLS] A [SEP] B [SEP], token types 0 then 1, then masked
    as bert_lm. The order label (1 = swapped) is ``target[:, 0]`` (the [CLS] position, never masked), so
    it travels with the MLM target (loss mlm_sop). Blocks hold max_len - 3 ids (three special tokens).
    """

    specials = 3

    def segments(self, ids: Any, sample_id: int) -> tuple[Any, Any, int]:
        """(input_ids, token_type_ids, swapped) of one stored block."""
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        rng = np.random.default_rng([self.seed, self.epoch, int(sample_id), 1])  # apart from the mask stream
        body = np.asarray(ids[1:-1], dtype=np.int64)
        cut = int(rng.integers(1, len(body))) if len(body) > 1 else len(body)
        first, second = body[:cut], body[cut:]
        swapped = int(len(second) > 0 and rng.random() < 0.5)
        if swapped:
            first, second = second, first
        joined = self.join([first, second])
        return joined["input_ids"], joined["token_type_ids"], swapped

    def collate(self, samples: list[dict[str, Any]]) -> dict[str, Any]:
        parts = [self.segments(s["input_ids"], s["id"]) for s in samples]
        batch = BertProcessor.collate(self, [{**s, "input_ids": p[0], "token_type_ids": p[1]}
                                             for s, p in zip(samples, parts, strict=True)])
        masked = [self.mask(p[0], s["id"]) for s, p in zip(samples, parts, strict=True)]
        for (_, target), (_, _, swapped) in zip(masked, parts, strict=True):
            target[0] = swapped
        batch["net_input"]["input_ids"] = self.pad([m[0] for m in masked])
        batch["target"] = self.pad([m[1] for m in masked], pad_value=IGNORE_INDEX)
        return batch


class ChineseWords:
    """Whole words for Chinese MLM: runs of single-character CJK tokens are cut into words by jieba;
    ``continuation(ids)`` marks the tokens that continue a word (as ## does for WordPiece)."""

    def __init__(self, tokens: list[str]) -> None:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        jieba = require("jieba", "word_segmenter: jieba")
        jieba.setLogLevel(60)
        self.jieba = jieba
        self.tokens = tokens
        self.is_char = np.array([len(t) == 1 and "\u4e00" <= t <= "\u9fff" for t in tokens], dtype=bool)

    def continuation(self, ids: Any) -> Any:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        chars = self.is_char[ids]
        out = np.zeros(len(ids), dtype=bool)
        edges = np.flatnonzero(np.diff(np.concatenate([[0], chars.astype(np.int8), [0]])))
        for start, end in zip(edges[::2], edges[1::2], strict=True):
            text = "".join(self.tokens[i] for i in ids[start:end])
            offset = start
            for word in self.jieba.lcut(text, HMM=False):
                out[offset + 1: offset + len(word)] = True
                offset += len(word)
        return out


class BlockAssembler:
    """Turns the stream of tokenized lines (``None`` = document end) into blocks of max_len - 2 ids."""

    def __init__(self, processor: BertLMProcessor, break_mode: str) -> None:
        self.processor, self.mode = processor, break_mode
        self.room = processor.block_room
        self.current: list[Any] = []
        self.size = 0

    def _emit(self) -> list[Any]:
        import numpy as np  # lazy: x-prepro --dry starts without numpy

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
