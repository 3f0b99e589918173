"""x-pred: predictions for raw files, tables or splits, written as TSV (or numpy arrays) (docs/inference.md).

    x-pred pred.hjson          # {save_dir: runs/a, predict_file_map: {new.txt: new.pred.tsv}}
    x-pred pred.hjson --dry    # check the run, every input and output; load nothing

Inputs are read with the run's own parser, loader, tokenizer and vocabulary, with or without labels,
chunk by chunk (bounded memory); each chunk is predicted in length-sorted batches and written in input
order. The output can be read back with ``pd.read_csv(f, sep='\\t', header=0, quoting=csv.QUOTE_NONE)``;
xdpx/inference/outputs.py says how tabs and line breaks inside texts are escaped.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from xdpx import io
from xdpx.command import Command, commands
from xdpx.config.errors import ConfigError
from xdpx.config.options import Args, Option
from xdpx.config.ranges import at_least
from xdpx.data.composition import build_loader
from xdpx.data.dataset import open_split
from xdpx.errors import UserError
from xdpx.inference.evaluate import locate
from xdpx.inference.explain_options import EXPLAIN_OPTIONS
from xdpx.inference.options import CALIBRATED, LOAD_OPTIONS, RAW_DATA_OPTIONS, read_paths
from xdpx.inference.rerank_options import SEARCH_OPTIONS
from xdpx.io.credentials import redact
from xdpx.io.ownership import Output
from xdpx.io.tsv_cells import escape

PRED_OPTIONS: list[Any] = [
    Option("predict_file_map", dict[str, str],
           doc="inputs to predict -> output files: raw files in the training format (with or without labels), "
               "tables (Parquet, Excel .xlsx, datasets save_to_disk folders: columns picked by the names of the "
               "run's fields), SQL tables (sqlite:///x.db?table=t, postgresql://...?table=t) or split names of the "
               "run's data_dir; the outputs are TSV files (numpy .npz with binary: true)"),
    Option("header", bool, default=True, doc="write the column names as the first line of each TSV"),
    Option("concat_origin", bool, default=True,
           doc="put the input's original columns before the prediction columns (TSV output)"),
    Option("max_predict", int, default=None, validate=at_least(1),
           doc="predict at most this many samples of each input; null: all"),
    Option("distill", bool, default=False,
           doc="write the logits only (one column per class), e.g. as soft targets for distillation"),
    Option("binary", bool, default=False,
           doc="write numpy arrays (np.savez: record, and logits / probabilities, predictions, labels / scores) "
               "instead of TSV"),
    *EXPLAIN_OPTIONS,
    CALIBRATED,
    *SEARCH_OPTIONS,  # search_corpus, search_k, rerank, rerank_k: xdpx/inference/search_pred.py
]


def split_chunks(loaded: Any, split: str, limit: int | None, size: int = 4096) -> Iterator[Any]:
    """A split of data_dir in chunks shaped like encoded raw chunks (its decoded text as the origin)."""
    from xdpx.inference.encoding import Encoded  # lazy: loads numpy

    data = open_split(loaded.data_dir, split)
    total = len(data) if limit is None else min(limit, len(data))
    processor = loaded.processor
    for start in range(0, total, size):
        samples = [data[i] for i in range(start, min(start + size, total))]
        columns = [[processor.decode(s)] + ([processor.decode_target(s["target"])] if "target" in s else [])
                   for s in samples]
        yield Encoded(samples, [int(s["id"]) for s in samples], columns, bool(samples and "target" in samples[0]))


def origin_cells(columns: list[str]) -> list[str]:
    """The input's own columns of a record: a table row picked by the run's fields carries all of them."""
    return getattr(columns, "origin", columns)


class Writer:
    """One output: TSV lines written as chunks arrive (atomic: the file appears when complete), or the
    numpy arrays gathered and saved at the end."""

    def __init__(self, path: str, args: Args, fmt: Any, origin: Any) -> None:
        self.path, self.args, self.fmt, self.origin = path, args, fmt, origin
        self.file = None if args.binary else io.open(path, "w")
        self.width: int | None = None
        self.count = 0
        self.logits: list[Any] = []
        self.numbers: list[int] = []

    def write(self, encoded: Any, logits: Any) -> None:
        self.count += len(encoded.samples)
        if self.args.binary:
            self.logits.append(logits)
            self.numbers.extend(encoded.numbers)
            return
        concat = self.args.concat_origin
        if self.width is None:
            self.width = len(origin_cells(encoded.columns[0])) if concat and encoded.columns else 0
            if self.args.header:
                names = self.origin(self.width, encoded.labelled) if concat else []
                self.file.write("\t".join(names + self.fmt.names()) + "\n")
        lines = []
        for columns, row in zip(encoded.columns, self.fmt.rows(logits, encoded.samples)):
            columns = origin_cells(columns)
            cells = [escape(c) for c in columns[: self.width]] + [""] * (self.width - len(columns)) if concat else []
            lines.append("\t".join(cells + [escape(c) for c in row]))
        if lines:
            self.file.write("\n".join(lines) + "\n")

    def close(self) -> None:
        import numpy as np  # lazy: loads numpy

        from xdpx.inference.outputs import concat_padded  # lazy: loads numpy

        if self.args.binary:
            logits = concat_padded(self.logits) if self.logits else np.zeros((0,), np.float32)
            with io.open(self.path, "wb") as f:
                np.savez(f, **self.fmt.arrays(logits, self.numbers))
            return
        if self.width is None and self.args.header:  # an input without samples still gets its header
            self.file.write("\t".join(self.fmt.names()) + "\n")
        self.file.close()


@commands.register("x-pred")
class PredictCommand(Command):
    """Write the predicted label, its probability and every class probability (or the score) for inputs."""

    name = "x-pred"
    example = "x-pred - <<< '{save_dir: outputs/runs/reviews_cnn, predict_file_map: {new.txt: new.pred.tsv}}'"
    group = "pred"
    every_rank = True

    def options(self) -> list[Any]:
        return LOAD_OPTIONS + RAW_DATA_OPTIONS + PRED_OPTIONS

    def outputs(self, args: Args) -> list[Output]:
        return [Output("predict_file_map", output) for output in args.predict_file_map.values()]

    def inputs(self, args: Args) -> list[tuple[str, str]]:
        return super().inputs(args) + read_paths(args, "predict_file_map", list(args.predict_file_map))

    def run(self, args: Args, dry: bool = False) -> None:
        # lazy: the run-loading side (models, checkpoints); every command's --help imports this module
        from xdpx.inference.loading import check_checkpoint, run_options

        run_args = run_options(args)
        check_checkpoint(args)
        # lazy: the attribution code (captum, the models) only for explain: true; --help reads only its options
        from xdpx.inference.explain_columns import check_explain

        check_explain(args, run_args)
        # retrieve, then rerank (xdpx/inference/search_pred.py); a rerank_weight alone is refused there
        if args.get("search_corpus") or args.get("rerank") or not args.is_default("rerank_weight"):
            # lazy: numpy and the models; the module is x-pred's only with search_corpus
            from xdpx.inference.search_pred import search_command

            return search_command(args, run_args, dry)
        where = args.source("predict_file_map")
        inputs = []
        for name, output in args.predict_file_map.items():
            if not io.is_writable(output):
                raise ConfigError(f"{where}: key 'predict_file_map': cannot write the output {redact(output)!r}")
            inputs.append((name, locate(name, run_args.data_dir, "predict_file_map", where, run_args), output))
        if dry:
            for name, source, output in inputs:
                kind = "split" if isinstance(source, str) else type(source).__name__
                print(redact(f"# {name} ({kind}) -> {output}"))
            return
        predict_inputs(args, run_args, inputs)


def predict_inputs(args: Args, run_args: Args, inputs: list[tuple[str, Any, str]]) -> None:
    from xdpx.inference.encoding import encode_source  # lazy: loads numpy
    from xdpx.inference.outputs import origin_names, prediction_format  # lazy: loads numpy
    from xdpx.runtime import distributed  # lazy: loads torch, numpy
    from xdpx.runtime.scoring import predict_logits  # lazy: loads torch, numpy

    context = distributed.current()  # under torchrun each process predicts its share; rank 0 writes
    # lazy: as in run(): the models load only when a command runs
    from xdpx.inference.loading import load_model

    loaded = load_model(args, run_args)
    processor = loaded.processor
    labels = processor.target_map.labels if processor.target_map is not None else None
    try:
        fmt = prediction_format(loaded.task, args, labels, loaded.regression)
    except UserError as e:
        raise UserError(f"{e} (looked in {processor.data_dir})") from None
    # distill writes the raw logits (soft targets); otherwise the run's calibrated probabilities when it has them
    # lazy: numpy, only once a model is loaded (x-pred's module is imported with every command)
    from xdpx.inference.calibration import calibrates, run_temperature, scale_logits

    temperature = run_temperature(args.save_dir, loaded, raw=not args.calibrated or args.distill,
                                  say=print if context.is_main else lambda _m: None) if calibrates(loaded) else None
    if args.explain:  # the attribution columns after the prediction columns
        # lazy: the attribution code (captum, the models) only for explain: true
        from xdpx.inference.explain_columns import ExplainedFormat, attach_texts

        fmt = ExplainedFormat(fmt, loaded, args, args.source("predict_file_map"))
    loader = build_loader(run_args)
    for name, source, output in inputs:
        started = time.perf_counter()
        if isinstance(source, str):
            chunks = split_chunks(loaded, source, args.max_predict)

            def origin(width: int, labelled: bool) -> list[str]:
                return ["text", "label"][:width]
        else:
            chunks = encode_source(source, run_args, processor.data_dir, args.workers, args.skip_bad_lines,
                                   args.max_predict, args.get("max_bad_fraction", 0.0))

            def origin(width: int, labelled: bool, table: Any = source) -> list[str]:
                # read when the header is written: an Excel or Arrow table names its columns as it is read
                return origin_names(width, loader, labelled, table.column_names)
        writer = Writer(output, args, fmt, origin) if context.is_main else None
        if args.explain:
            fmt.name = name
        skipped = 0
        try:
            for encoded in chunks:
                skipped += encoded.stats["bad_lines"]
                for key in (k for k in encoded.stats if k.startswith("example: ")):
                    print(redact(f"skipped {key[len('example: '):]}"))
                if args.explain and not isinstance(source, str):  # words as the input spells them
                    attach_texts(encoded, loader)
                logits = predict_logits(loaded.task, loaded.model, processor, encoded.samples, loaded.batch_size,
                                        loaded.autocast, loaded.to_device, context, progress=f"x-pred {name}")
                if writer is not None:
                    writer.write(encoded, scale_logits(logits.numpy(), temperature))
        except BaseException:
            if writer is not None and writer.file is not None:
                writer.file.discard()  # an output cut short is never published
            raise
        distributed.barrier(context)
        if writer is None:
            continue
        writer.close()
        seconds = time.perf_counter() - started
        # an input may be an SQL URL with its password: the line shows it masked
        print(redact(f"x-pred {name} -> {output}: {writer.count} predictions in {seconds:.1f}s "
                     f"({writer.count / max(seconds, 1e-9):.0f}/s)"
                     + (f"; skipped {skipped} bad line(s)" if skipped else "")), flush=True)
