"""x-eval: loss and every metric of a checkpoint on splits, raw files or tables (docs/inference.md).

    x-eval eval.hjson          # {save_dir: runs/a, valid_subset: dev}
    x-eval eval.hjson --dry    # check the run, extra_config and every subset; load nothing

The numbers come from the evaluation function x-train uses for valid.log.tsv
(xdpx.runtime.scoring.evaluate): the best checkpoint on the run's valid_subset gives exactly the
best row of valid.log.tsv.
"""

from __future__ import annotations

from typing import Any

from xdpx import io
from xdpx.command import Command, commands
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args, Option
from xdpx.config.ranges import at_least
from xdpx.data.dataset import open_split
from xdpx.errors import UserError
from xdpx.inference.options import CALIBRATED, ECE_BINS, LOAD_OPTIONS, RAW_DATA_OPTIONS, read_paths
from xdpx.inference.rerank_options import FIRST_STAGE_OPTIONS, reranking
from xdpx.io.credentials import redact
from xdpx.io.ownership import Output
from xdpx.models.choice import model_label
from xdpx.runtime.run_files import available_splits, format_value

EVAL_OPTIONS: list[Any] = [
    Option("valid_subset", str | list[str],
           doc="what to evaluate: split names of the run's data_dir (dev, train...), raw files in the training "
               "format, tables (Parquet, .xlsx, datasets folders: columns by the names of the run's fields) or SQL "
               "tables (sqlite:///x.db?table=t, postgresql://...?table=t), or for a bi-encoder a BEIR corpus folder (its "
               "qrels/test.tsv, or name qrels/<split>.tsv: NDCG, MAP, MRR, recall, precision at each k of recall_at); "
               "one or a list"),
    Option("save_to_file", str, default=None, path="output",
           doc="also write the results to this .tsv (one row per subset: checkpoint, subset, samples, loss, "
               "metrics)"),
    Option("save_mode", str, default="a", choices=["a", "w"],
           doc="'a': add rows to save_to_file (its columns must match); 'w': replace it"),
    Option("max_eval_steps", int, default=None, validate=at_least(1),
           doc="evaluate at most this many batches of each subset (of the length-sorted order); null: all"),
    Option("ignore_novel_target", bool, default=False,
           doc="in raw files, skip the records whose label is not in the run's target map (counted and "
               "printed) instead of stopping at them as bad lines; see also the processing option target_unk"),
    CALIBRATED,
    ECE_BINS,
    *FIRST_STAGE_OPTIONS,  # a cross-encoder on a BEIR folder: rerank a bi-encoder's top rerank_k
]


EVAL_HEADER = b"checkpoint\tsubset\tsamples\t"  # the first columns of every save_to_file (evaluate_subsets)


def subset_names(value: str | list[str]) -> list[str]:
    return [value] if isinstance(value, str) else list(value)


def locate(name: str, data_dir: str, key: str, where: str, run_args: Any = None, rerank: bool = False) -> Any:
    """A split name (kept as a str) or the raw source ``name`` names (a table's columns picked by the
    ``fields`` of ``run_args``, the run's options); ConfigError when it is neither. ``rerank``: a BEIR
    folder is for a cross-encoder (x-eval's first_stage), not only a bi-encoder."""
    from xdpx.inference.sources import is_sql_url, open_raw, table_kind  # lazy: keeps --help light
    from xdpx.runtime.corpus import corpus_subset  # lazy: loads numpy

    splits = available_splits(data_dir) if data_dir and io.isdir(data_dir) else []
    if name in splits:
        return name
    corpus = corpus_subset(name, None if rerank else run_args, f"{where}: key '{key}'")  # a BEIR folder (xdpx/runtime/corpus.py)
    if corpus is not None:
        return corpus
    if not is_sql_url(name) and io.isdir(name) and table_kind(name) is None:
        raise ConfigError(f"{where}: key '{key}': {name!r} is a folder, not a file: name each file inside it (a "
                          "folder is read only when it is a datasets save_to_disk folder)")
    source = open_raw(name, run_args)
    if source is None:
        raise ConfigError(f"{where}: key '{key}': {name!r} is neither a split of the run's data_dir {data_dir} "
                          f"(available: {', '.join(splits) or 'none'}) nor an existing file or an SQL URL")
    return source


def read_subset(loaded: Any, args: Args, subset: Any) -> Any:
    """The dataset of a split, or the labelled samples of a raw source (SampleList)."""
    from xdpx.inference.encoding import SampleList, encode_source  # lazy: loads numpy

    if isinstance(subset, str):
        return open_split(loaded.data_dir, subset)
    samples, skipped, novel = [], 0, 0
    for encoded in encode_source(subset, loaded.run_args, loaded.processor.data_dir, args.workers,
                                 args.skip_bad_lines, max_bad_fraction=args.get("max_bad_fraction", 0.0),
                                 ignore_novel_target=args.ignore_novel_target):
        if encoded.samples and not encoded.labelled:
            raise UserError(f"{subset.name} has no labels (the first record has only the text column(s)): "
                            "x-eval needs labelled data; use x-pred for unlabelled inputs")
        samples.extend(encoded.samples)
        skipped += encoded.stats["bad_lines"]
        novel += encoded.stats["novel_targets"]
        for key in (k for k in encoded.stats if k.startswith("example: ")):
            print(redact(f"skipped {key[len('example: '):]}"))
    if skipped:
        print(redact(f"{subset.name}: skipped {skipped} bad line(s)"))
    if novel:
        print(redact(f"{subset.name}: skipped {novel} record(s) whose label is not in the run's target map "
                     "(ignore_novel_target)"))
    if not samples:
        raise UserError(f"{subset.name}: no samples to evaluate")
    return SampleList(samples, loaded.processor.fields)


def is_eval_table(path: str) -> bool:
    """A save_to_file written before XDPX kept records: its header is the one save_rows writes."""
    with io.open(path, "rb") as f:
        return f.read(len(EVAL_HEADER)) == EVAL_HEADER


def save_rows(path: str, rows: list[dict[str, Any]], mode: str) -> None:
    columns = list(dict.fromkeys(c for row in rows for c in row))  # a corpus row has metrics of its own
    header = "\t".join(columns)
    previous = ""
    if mode == "a" and io.exists(path):
        with io.open(path) as f:
            previous = f.read()
        first = previous.split("\n", 1)[0]
        if previous and first != header:
            raise UserError(f"save_to_file {redact(path)} has the columns {first.split(chr(9))}, these results "
                            f"{columns}: use another file or save_mode: w")
    lines = [] if previous else [header]
    lines += ["\t".join(format_value(row.get(c)) for c in columns) for row in rows]
    with io.open(path, "w") as f:
        f.write(previous + "\n".join(lines) + "\n")


@commands.register("x-eval")
class EvalCommand(Command):
    """Score a checkpoint (or an initialised model) on splits, raw files or tables: loss and every metric."""

    name = "x-eval"
    example = "x-eval examples/reviews/eval_test.hjson"
    group = "eval"
    every_rank = True

    def options(self) -> list[Any]:
        return LOAD_OPTIONS + RAW_DATA_OPTIONS + EVAL_OPTIONS

    def outputs(self, args: Args) -> list[Output]:
        return [Output(out.key, out.path, out.kind, legacy=is_eval_table) for out in super().outputs(args)]

    def inputs(self, args: Args) -> list[tuple[str, str]]:
        return super().inputs(args) + read_paths(args, "valid_subset", subset_names(args.valid_subset))

    def run(self, args: Args, dry: bool = False) -> None:
        # lazy: the run-loading side (models, checkpoints); every command's --help imports this module
        from xdpx.inference.loading import check_checkpoint, run_options

        run_args = run_options(args)
        check_checkpoint(args)
        where = args.source("valid_subset")
        # a subset is shown, printed and saved by its masked name (an SQL URL may hold a password)
        rerank = reranking(args, run_args)  # first_stage: a cross-encoder and a bi-encoder, checked before loading
        subsets = [(redact(name), locate(name, run_args.data_dir, "valid_subset", where, run_args, rerank))
                   for name in subset_names(args.valid_subset)]
        if dry:
            print(f"# model {model_label(run_args)} (task {run_args.task}, loss {run_args.loss}); subsets: "
                  + ", ".join(f"{n} ({'split' if isinstance(s, str) else type(s).__name__})" for n, s in subsets))
            return
        evaluate_subsets(args, run_args, subsets)


def evaluate_subsets(args: Args, run_args: Args, subsets: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    from xdpx.runtime import distributed  # lazy: loads torch, numpy
    from xdpx.runtime.corpus import CorpusSubset, evaluate_corpus  # lazy: loads numpy
    from xdpx.runtime.scoring import evaluate  # lazy: loads torch, numpy

    context = distributed.current()  # under torchrun each process scores its share of the batches
    # lazy: as in run(): the models load only when a command runs
    from xdpx.inference.loading import load_model

    loaded = load_model(args, run_args)
    # every classifier gets ECE and Brier; with the run's calibration.json also the calibrated figures
    # lazy: numpy, only once a model is loaded (x-eval's module is imported with every command)
    from xdpx.inference.calibration import bins_line, calibrates, calibration_metrics, run_temperature

    classifier = calibrates(loaded)
    temperature = run_temperature(args.save_dir, loaded, raw=not args.calibrated,
                                  say=print if context.is_main else lambda _m: None) if classifier else None
    rows = []
    for name, subset in subsets:
        if isinstance(subset, CorpusSubset):
            data = subset
            if context.is_main:
                print(f"x-eval {name}: {subset.data.summary()}", flush=True)
            metrics = rerank_corpus(args, loaded, subset.data) if args.get("first_stage") else \
                evaluate_corpus(loaded, subset.data, list(run_args.get("recall_at") or [1, 10]), context)
        else:
            data = read_subset(loaded, args, subset)
            outputs: list[Any] = []
            metrics = evaluate(loaded.task, loaded.model, loaded.processor, data, loaded.batch_size, loaded.autocast,
                               loaded.to_device, args.max_eval_steps, context=context, progress=f"x-eval {name}",
                               outputs_to=outputs if classifier else None)
            if outputs:
                metrics.update(calibration_metrics(*outputs[0], temperature, args.ece_bins))
                bins = {"": metrics.pop("bins"), " calibrated": metrics.pop("bins_calibrated", None)}
                for which, shown_bins in bins.items():
                    if shown_bins is not None and context.is_main:
                        print(f"x-eval {name} reliability{which} ({args.ece_bins} bins; confidence->accuracy (samples)): "
                              f"{bins_line(shown_bins)}")
        shown = " | ".join(f"{k} {format_value(v)}" for k, v in metrics.items())
        if context.is_main:
            print(f"x-eval {name} ({len(data)} samples): {shown}", flush=True)
        rows.append({"checkpoint": redact(loaded.checkpoint or "(initial)"), "subset": name, "samples": len(data),
                     **metrics})
    if args.save_to_file and context.is_main:
        save_rows(args.save_to_file, rows, args.save_mode)
        print(f"saved to {redact(args.save_to_file)}")
    distributed.barrier(context)  # the file is written before any process goes on to the next command
    return rows


def rerank_corpus(args: Args, loaded: Any, data: Any) -> dict[str, float]:
    """Both stages' metrics of a cross-encoder ``loaded`` reranking ``first_stage``'s top ``rerank_k`` (at each k
    of the first stage's recall_at)."""
    # lazy: numpy and the models, only when a cross-encoder reranks
    from xdpx.inference.rerank import Reranker, evaluate_reranking, load_run, relevant_column

    first = load_run(args.first_stage, None, args.batch_size)
    reranker = Reranker(loaded, relevant_column(loaded, args.save_dir), args.save_dir)
    metrics = evaluate_reranking(reranker, first, data, list(first.run_args.get("recall_at") or [1, 10]),
                                 args.rerank_k, weight=args.rerank_weight)
    return {**metrics, "rerank_weight": float(args.rerank_weight)}  # which row of a loop over weights is which
