"""``x-script eval_corpus SAVE_DIR BEIR_DIR [--split test] [--k 1,10,100] [--checkpoint <best>]
[--batch-size 64] [--out FILE]``: retrieval metrics of a bi-encoder run on a corpus with judgements.

BEIR_DIR is a folder in the BEIR format (xdpx/data/beir.py: corpus.jsonl, queries.jsonl, qrels/<split>.tsv).
Every document (its title and text joined by a space, as BEIR's sentence-transformers models read them)
and every judged query is embedded on its own with the run's processor, as x-serve's /embed does; each
query ranks the whole corpus by dot product (the cosine, for the normalised embeddings of the bi-encoders)
and the metrics of xdpx/metrics/ir.py are printed: ``ndcg_at_<k>``, ``map_at_<k>``, ``mrr_at_<k>``,
``recall_at_<k>``, ``precision_at_<k>`` for each k of ``--k``. A run trained with ``matryoshka_dims`` also
gets them at each of its widths (``ndcg_at_10@64``: the cosines of the vectors cut to 64). ``--out``
writes them as a two-column TSV (metric, value). A bad BEIR file is one line naming the file and line, exit
2, before the model is loaded; queries without a judgement are skipped and their count printed.
"""

from __future__ import annotations

import time

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.data.beir import read_beir
from xdpx.scripts.build_index import load_bi_encoder
from xdpx.scripts.result_tables import check_writable, number_flag, split_flags

USAGE = ("usage: x-script eval_corpus SAVE_DIR BEIR_DIR [--split test] [--k 1,10,100] [--checkpoint <best>] "
         "[--batch-size 64] [--out FILE]")


def parse_ks(raw: str) -> list[int]:
    try:
        ks = [int(word) for word in raw.split(",")]
    except ValueError:
        ks = []
    if not ks or min(ks) < 1:
        raise ConfigError([f"--k {raw!r}: a comma-separated list of integers >= 1 (e.g. 1,10,100). {USAGE}"])
    return sorted(set(ks))


@script("eval_corpus")
def main(argv: list[str]) -> int:
    """Score a bi-encoder run on a BEIR-format corpus: NDCG, MAP, MRR, recall and precision at k."""
    # lazy: runtime.corpus and the IR metrics wait for a run; x-script --help imports every tool
    from xdpx.runtime.corpus import evaluate_corpus

    positional, flags = split_flags(argv, {"split": "test", "k": "1,10,100", "checkpoint": "<best>",
                                           "batch_size": None, "out": None}, USAGE)
    if len(positional) != 2:
        raise ConfigError([USAGE])
    save_dir, folder = positional
    ks = parse_ks(str(flags["k"]))
    batch_size = int(number_flag(flags, "batch_size", USAGE, low=0)) if flags["batch_size"] is not None else None
    out = flags["out"]
    if out is not None:
        check_writable("eval_corpus", [("--out", str(out))], [("SAVE_DIR", save_dir), ("BEIR_DIR", folder)])
    data = read_beir(folder, str(flags["split"]))  # bad files: exit 2 before the model loads
    print(f"eval_corpus: {data.summary()}")
    predictor, checkpoint = load_bi_encoder(save_dir, str(flags["checkpoint"]), batch_size)
    started = time.time()
    metrics = evaluate_corpus(predictor.loaded, data, ks)  # type: ignore[attr-defined]
    for name, value in metrics.items():
        print(f"{name}\t{value:.6g}")
    print(f"eval_corpus: {len(data.queries)} queries, {len(data.corpus)} documents, checkpoint {checkpoint}, "
          f"{time.time() - started:.1f}s")
    if out is not None:
        with io.open(str(out), "w") as f:
            f.write("metric\tvalue\n" + "".join(f"{name}\t{value!r}\n" for name, value in metrics.items()))
        print(f"saved to {out}")
    return 0
