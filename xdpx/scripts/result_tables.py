"""What the result tools share: reading x-pred's prediction TSV, their small command lines, and writing an
output file only where the overwrite rule allows it (docs/reliability.md)."""

from __future__ import annotations

from dataclasses import dataclass

from xdpx import io
from xdpx.config.errors import ConfigError
from xdpx.errors import UserError
from xdpx.io.ownership import Output, check_outputs, record
from xdpx.io.tsv_cells import unescape


@dataclass
class PredictionTable:
    """x-pred's output of a labelled input: true labels, predicted labels and, per class, probabilities."""

    path: str
    truth: list[str]
    predicted: list[str]
    labels: list[str]  # the run's classes, in target-map order (from the prob_<label> columns)
    probabilities: dict[str, list[float]]


def read_prediction_rows(path: str, columns: tuple[str, ...],
                         flags: str = "--truth / --predict") -> tuple[list[str], list[list[str]]]:
    """The header and the rows of x-pred's TSV, each row as wide as the header; ``columns`` must be there
    (``flags``: the tool's flags that name them, for the error)."""
    if not io.exists(path):
        raise UserError(f"{path} does not exist: give the TSV that x-pred wrote for a labelled input")
    with io.open(path) as f:
        lines = f.read().splitlines()
    if not lines:
        raise UserError(f"{path} is empty: give the TSV that x-pred wrote for a labelled input")
    header = lines[0].split("\t")
    for column in columns:
        if column not in header:
            raise UserError(f"{path}:1: no column {column!r} in the header ({', '.join(header)}): run x-pred on a "
                            f"labelled input with header: true and concat_origin: true, or name the columns "
                            f"with {flags}")
    rows = [line.split("\t") for line in lines[1:]]
    for number, cells in enumerate(rows, start=2):
        if len(cells) != len(header):
            raise UserError(f"{path}:{number}: {len(cells)} cells where the header has {len(header)}")
    return header, rows


def read_predictions(path: str, truth_column: str = "label", predict_column: str = "predict") -> PredictionTable:
    """Read x-pred's TSV (``header: true`` and ``concat_origin: true``, the defaults, on a labelled input)."""
    header, rows = read_prediction_rows(path, (truth_column, predict_column))
    labels = [name[len("prob_"):] for name in header if name.startswith("prob_")]
    truth_at, predict_at = header.index(truth_column), header.index(predict_column)
    prob_at = {label: header.index(f"prob_{label}") for label in labels}
    truth, predicted, probabilities = [], [], {label: [] for label in labels}
    for number, cells in enumerate(rows, start=2):
        truth.append(unescape(cells[truth_at]))
        predicted.append(unescape(cells[predict_at]))
        for label, at in prob_at.items():
            try:
                probabilities[label].append(float(cells[at]))
            except ValueError:
                raise UserError(f"{path}:{number}: prob_{label} {cells[at]!r} is not a number") from None
    return PredictionTable(path, truth, predicted, unescape_all(labels), probabilities)


def unescape_all(cells: list[str]) -> list[str]:
    return [unescape(c) for c in cells]


def split_flags(argv: list[str], flags: dict[str, str | None], usage: str) -> tuple[list[str], dict[str, str | None]]:
    """Positional arguments and ``--flag VALUE`` pairs (``flags``: name -> default). A word starting with
    ``--`` that is not a known flag is an error, not a path."""
    positional, values = [], dict(flags)
    i = 0
    while i < len(argv):
        word = argv[i]
        if word.startswith("--"):
            name = word[2:].replace("-", "_")
            if name not in flags or i + 1 >= len(argv):
                raise ConfigError([f"{'unknown flag' if name not in flags else 'no value after'} {word!r}: {usage}"])
            values[name] = argv[i + 1]
            i += 2
        else:
            positional.append(word)
            i += 1
    return positional, values


def number_flag(values: dict[str, str | None], name: str, usage: str, low: float | None = None) -> float:
    raw = values[name]
    try:
        number = float(raw)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise ConfigError([f"--{name} {raw!r}: not a number. {usage}"]) from None
    if low is not None and not number > low:
        raise ConfigError([f"--{name} {raw}: must be > {low:g}. {usage}"])
    return number


def check_writable(tool: str, paths: list[tuple[str, str]], inputs: list[tuple[str, str]]) -> None:
    """Refuse, before any work, to write where XDPX's overwrite rule forbids (a user's file, an input)."""
    problems = check_outputs(tool, [Output(key, path) for key, path in paths], inputs, lambda _key: f"x-script {tool}")
    if problems:
        raise ConfigError(problems)


def write_text(tool: str, path: str, text: str) -> None:
    """Write ``text`` to ``path`` (checked by :func:`check_writable`) and note that ``tool`` wrote it."""
    folder = io.dirname(path)
    if folder:
        io.makedirs(folder)
    with io.open(path, "w") as f:
        f.write(text)
    record(tool, path)
