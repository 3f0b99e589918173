"""``loader: corpus_mix``: a split made of several corpora mixed by given ratios (language-model pretraining
on, e.g., 70% encyclopedia and 30% news whatever the corpora's sizes).

The files of a split are matched against ``mix_ratios`` ({path or glob under data_source: weight}); each
key is one corpus (the files a glob matches form one, read in order). Each corpus contributes units (documents, or lines with ``mix_unit: line``) in proportion to its weight:

- without ``mix_size``, as many units as the ratios allow without repeating any: the corpus that is
  scarcest for its weight is taken whole, the others are subsampled;
- with ``mix_size`` (units in the split), each corpus gives its share, repeated whole as often as needed
  (upsampled) and then subsampled for the rest.

Which units are taken, and in which order the corpora interleave, follows ``mix_seed``: the same inputs
and options give the same bytes. Inside a corpus units keep their file order. A split whose files match no
``mix_ratios`` key (a dev file) is read as it is. Files are read twice (count, then emit), streaming: memory
holds one flag per unit of the subsampled corpora, not the text.
"""

from __future__ import annotations

import fnmatch
from collections import Counter
from collections.abc import Iterator
from typing import Any

from xdpx import io
from xdpx.config.options import Option, Rule
from xdpx.config.ranges import above, at_least
from xdpx.data import loaders
from xdpx.data.errors import BadLine
from xdpx.data.loading import CorpusLoader
from xdpx.data.reading import file_records, new_digest

UNITS = ("document", "line")
Unit = list[tuple[str, int, Any]]  # the (file, number, raw record) of one document or line


MIX_OPTIONS = [  # used with mix_ratios only
    Option("mix_unit", str, default="document", choices=UNITS,
           doc="with mix_ratios: what is counted and sampled: document (lines up to a blank line; keeps "
               "documents whole) or line (for corpora without document breaks)"),
    Option("mix_size", int, default=None, validate=at_least(1),
           doc="with mix_ratios: units in a mixed split (corpora smaller than their share are repeated); "
               "null: as many as the ratios allow without repeating a unit"),
    Option("mix_seed", int, default=1, validate=at_least(0),
           doc="with mix_ratios: seed of the sampling and of the interleaving of the corpora"),
]


def _blank(raw: Any) -> bool:
    return not (raw.strip() if isinstance(raw, (bytes, str)) else raw)


@loaders.register("corpus_mix")
class CorpusMixLoader(CorpusLoader):
    """A corpus loader whose splits mix several corpora by ``mix_ratios`` (goes with processor bert_lm)."""

    options = [*CorpusLoader.options,
               Option("mix_ratios", dict[str, float], default=None, validate=above(0),
                      doc="{file or glob under data_source: weight}: each key is one corpus (a glob's files "
                          "together, in order); its share of a split is its weight over the sum of the weights of the "
                          "split's corpora, e.g. {wiki.txt: 7, news/*.txt: 3}; a split whose files match no key is "
                          "read unmixed. null: no mixing (loader corpus; the original XDPX's corpus_mix configs, "
                          "whose whole-word masking is processor bert_lm's mask_whole_words)"),
               *MIX_OPTIONS,
               Rule(lambda a: a.get("mix_unit") != "line" or a.get("break_mode") != "complete_doc",
                    "mix_unit: line keeps no document breaks, which break_mode: complete_doc needs",
                    keys=("mix_unit", "break_mode"))]

    def mixes(self, files: list[str]) -> bool:
        return self.args.get("mix_ratios") is not None and any(self._key(f) is not None for f in files)

    def _key(self, path: str) -> str | None:
        """The first ``mix_ratios`` key that names ``path`` (its corpus), or None."""
        source = self.args.get("data_source") or ""
        return next((key for key in self.args.mix_ratios
                     if fnmatch.fnmatchcase(path, io.join(source, key)) or path == key), None)

    def mixed_records(self, files: list[str], parser: Any, start_line: int, digest: Any,
                      counts: Counter[str]) -> Iterator[tuple[str, int, Any]]:
        """(file, number, raw record) of the mixed split, in the mixed order (see the module doc)."""
        import numpy as np  # lazy: x-prepro --dry starts without numpy

        corpora: dict[str, list[str]] = {}  # key -> its files, in data_files order
        for path in files:
            key = self._key(path)
            if key is None:
                raise BadLine(f"mix_ratios has no entry for this file of a mixed split (keys: "
                              f"{', '.join(self.args.mix_ratios)}): add one", where=path)
            corpora.setdefault(key, []).append(path)
        keys = list(corpora)
        sizes = [sum(1 for _ in self._units(corpora[k], parser, start_line, digest)) for k in keys]
        empty = [k for k, n in zip(keys, sizes) if n == 0]
        if empty:
            raise BadLine(f"no {self.args.mix_unit} to mix", where=", ".join(corpora[empty[0]]))
        shares = np.array([self.args.mix_ratios[k] for k in keys], dtype=np.float64)
        shares /= shares.sum()
        wanted = _wanted(shares, np.array(sizes), self.args.mix_size)
        rng = np.random.default_rng(self.args.mix_seed)
        streams = []
        for key, size, k, share in zip(keys, sizes, wanted, shares):
            repeats, rest = divmod(int(k), size)
            mask = np.zeros(size, dtype=bool)
            mask[rng.choice(size, rest, replace=False)] = True
            streams.append(self._planned(corpora[key], parser, start_line, repeats, mask))
            counts[f"mixed: {key}: {k} {self.args.mix_unit}s of {size} (share {share:.1%})"] += 1
        order = rng.permutation(np.repeat(np.arange(len(keys)), wanted))
        try:
            for corpus in order:
                yield from next(streams[corpus])
        finally:
            for stream in streams:  # closes the files still open
                stream.close()

    def _planned(self, files: list[str], parser: Any, start_line: int, repeats: int, mask: Any) -> Iterator[Unit]:
        """One corpus's units in the plan: the whole corpus ``repeats`` times, then those ``mask`` picks."""
        for _ in range(repeats):
            yield from self._units(files, parser, start_line, new_digest())
        for index, unit in enumerate(self._units(files, parser, start_line, new_digest())):
            if mask[index]:
                yield unit

    def _units(self, files: list[str], parser: Any, start_line: int, digest: Any) -> Iterator[Unit]:
        """The units of a corpus's files. A document ends with a blank record (one is added at the end of a
        file if missing), so that documents of different files never run together."""
        for path in files:
            unit: Unit = []
            last = 0
            for number, raw in file_records(path, parser, start_line, digest):
                last = number
                if self.args.mix_unit == "line":
                    if not _blank(raw):
                        yield [(path, number, raw)]
                elif _blank(raw):
                    if unit:
                        yield [*unit, (path, number, raw)]
                    unit = []
                else:
                    unit.append((path, number, raw))
            if unit:
                yield [*unit, (path, last + 1, b"")]


def _wanted(shares: Any, sizes: Any, total: int | None) -> Any:
    """Units per corpus: proportional to ``shares`` (largest remainders, so they sum to the total)."""
    import numpy as np  # lazy: x-prepro --dry starts without numpy

    if total is None:  # the largest total for which no corpus has to repeat a unit
        total = int(np.floor(min(sizes / shares) + 1e-9))
    exact = shares * total
    wanted = np.floor(exact).astype(np.int64)
    for i in np.argsort(-(exact - wanted), kind="stable")[: total - int(wanted.sum())]:
        wanted[i] += 1
    return wanted
