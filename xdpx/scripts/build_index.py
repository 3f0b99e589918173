"""``x-script build_index SAVE_DIR TEXTS OUT_DIR [--checkpoint <best>] [--column 0] [--backend auto]
[--index exact] [--quantize none] [--batch-size 64]``: embed every text of TEXTS with a bi-encoder run and write a nearest-neighbour index.

SAVE_DIR is an x-train run of model bi_encoder or bert_bi_encoder (its ``--checkpoint``: ``<best>``,
``<last>`` or a file). TEXTS holds one text per line; with ``--column N`` it is tab-separated and column N
(0-based) is the text (e.g. the positives of a retrieval split: ``--column 1``). Each text is encoded on its
own with the run's processor, as x-serve's POST /embed does. The text's id is its line number minus 1
(0-based): a blank line before more texts is refused (it would shift every later id off its line), blank
lines at the end are ignored. index.json stores the run, checkpoint and TEXTS as absolute paths, so that
search finds them from any folder. ``--backend``: faiss (faiss-cpu, the ``faiss`` extra), numpy (a matrix with the
same interface and the same answers), auto (faiss when installed). ``--index hnsw|ivf`` (approximate) and
``--quantize int8|binary`` (smaller vectors) build a FAISS index of that kind (xdpx/runtime/index_kinds.py)
and print its recall@10 against the exact float32 search, also stored in index.json. OUT_DIR gets
index.json, the vectors and texts.tsv (xdpx/runtime/vector_index.py); query it with x-script search.
"""

from __future__ import annotations

import time

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.io.ownership import Output, check_outputs, claim
from xdpx.models.checkpoints import BEST, LAST
from xdpx.models.choice import model_label
from xdpx.scripts.result_tables import number_flag, split_flags

USAGE = ("usage: x-script build_index SAVE_DIR TEXTS OUT_DIR [--checkpoint <best>] [--column 0] "
         "[--backend auto] [--index exact|hnsw|ivf] [--quantize none|int8|binary] [--batch-size 64]")


def read_texts(path: str, column: int | None) -> list[str]:
    if not io.exists(path):
        raise UserError(f"{path} does not exist: give a file of texts, one per line")
    texts: list[str] = []
    blank = None  # the first blank line not yet followed by a text
    with io.open(path) as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\r\n")
            if not line.strip():
                blank = blank or number
                continue
            if blank is not None:
                raise UserError(f"{path}:{blank}: a blank line before more texts: the id of a text is its line "
                                "number minus 1, and a skipped line would shift the ids after it; remove the blank "
                                "line(s)")
            if column is not None:
                cells = line.split("\t")
                if column >= len(cells):
                    raise UserError(f"{path}:{number}: {len(cells)} column(s), no column {column} (--column counts "
                                    "from 0)")
                line = cells[column]
                if not line.strip():
                    raise UserError(f"{path}:{number}: column {column} is empty: every line needs a text")
            texts.append(line.strip())
    if not texts:
        raise UserError(f"{path}: no text in it")
    return texts


def load_bi_encoder(save_dir: str, checkpoint: str, batch_size: int | None) -> tuple[object, object]:
    """The run's Predictor (its model, processor and batching) and the path of the checkpoint loaded."""
    # lazy: the model modules wait for a run (x-script --help imports every tool)
    from xdpx.serve.embedding import serves_embeddings
    from xdpx.serve.predictor import load_predictor  # lazy: as above

    spec = io.join(save_dir, checkpoint) if checkpoint in (BEST, LAST) else checkpoint
    predictor = load_predictor(save_dir, spec, batch_size, cpu=True)
    if not serves_embeddings(predictor):
        raise UserError(f"{save_dir} is a {model_label(predictor.loaded.run_args)} run: build_index needs a bi-encoder "
                        "(model bi_encoder or bert_bi_encoder)")
    return predictor, predictor.loaded.checkpoint


def embed_texts(predictor: object, texts: list[str], tool: str = "build_index") -> object:
    """``[N, D]`` float32 embeddings, each text encoded on its own (x-serve /embed's processing)."""
    # lazy: waits for a run (x-script --help imports every tool)
    from xdpx.runtime.corpus import embed

    return embed(predictor.loaded, texts, progress=f"x-script {tool}")  # type: ignore[attr-defined]


@script("build_index")
def main(argv: list[str]) -> int:
    """Embed a file of texts with a bi-encoder run and write a FAISS (or numpy) nearest-neighbour index."""
    # lazy: the index modules wait for a run (x-script --help imports every tool)
    from xdpx.runtime.index_kinds import KINDS, QUANTIZE, KindIndex, default_params, recall_at_k
    from xdpx.runtime.vector_index import BACKENDS, new_index, save_index  # lazy: as above

    positional, flags = split_flags(argv, {"checkpoint": "<best>", "column": None, "backend": "auto",
                                           "index": "exact", "quantize": "none", "batch_size": None}, USAGE)
    if len(positional) != 3:
        raise ConfigError([USAGE])
    save_dir, texts_path, out_dir = positional
    if flags["backend"] not in BACKENDS:
        raise ConfigError([f"--backend {flags['backend']!r}: one of {', '.join(BACKENDS)}. {USAGE}"])
    kind, quantize = str(flags["index"]), str(flags["quantize"])
    if kind not in KINDS or quantize not in QUANTIZE:
        flag, value, allowed = ("index", kind, KINDS) if kind not in KINDS else ("quantize", quantize, QUANTIZE)
        raise ConfigError([f"--{flag} {value!r}: one of {', '.join(allowed)}. {USAGE}"])
    plain = kind == "exact" and quantize == "none"
    if not plain and flags["backend"] == "numpy":
        raise ConfigError([f"--index {kind} --quantize {quantize} is a FAISS index: use --backend faiss or auto "
                           "(faiss-cpu, the faiss extra)"])
    column = int(number_flag(flags, "column", USAGE, low=-1)) if flags["column"] is not None else None
    batch_size = int(number_flag(flags, "batch_size", USAGE, low=0)) if flags["batch_size"] is not None else None
    # OUT_DIR: a new or empty folder, or one build_index wrote (never a folder of the user's own files)
    problems = check_outputs("build_index", [Output("OUT_DIR", out_dir, kind="folder")],
                             [("TEXTS", texts_path), ("SAVE_DIR", save_dir)], lambda _key: "x-script build_index")
    if problems:
        raise ConfigError(problems)
    texts = read_texts(texts_path, column)
    predictor, checkpoint = load_bi_encoder(save_dir, str(flags["checkpoint"]), batch_size)
    started = time.time()
    vectors = embed_texts(predictor, texts)
    index = (new_index(str(flags["backend"]), vectors.shape[1]) if plain
             else KindIndex(vectors.shape[1], kind, quantize, default_params(kind, len(vectors))))
    index.add(vectors)
    recall: dict[str, float | int] = {}
    if isinstance(index, KindIndex):  # what the approximation or the quantization costs, measured now
        recall["recall_at_10"], recall["recall_queries"] = recall_at_k(vectors, index)
        print(f"build_index: {index.describe()}: recall@10 {recall['recall_at_10']:.4f} against the exact float32 "
              f"search ({recall['recall_queries']} of the indexed texts as queries)")
    # absolute: search may run from another folder than this one (remote paths stay as they are)
    save_index(out_dir, index, texts, {"save_dir": io.abspath(save_dir), "checkpoint": io.abspath(str(checkpoint)),
                                       "texts": io.abspath(texts_path), "column": column, "metric": "inner_product",
                                       **recall})
    claim("build_index", out_dir)
    print(f"build_index: {len(texts)} texts of {texts_path} -> {out_dir} ({index.backend}, "
          f"{index.describe() if isinstance(index, KindIndex) else 'exact'}, dim {index.dim}) in "
          f"{time.time() - started:.1f}s")
    return 0
