"""``x-script confusion_matrix PREDICTIONS OUT [--truth label] [--predict predict]``: who is taken for whom.

PREDICTIONS is the TSV x-pred writes for a labelled input (header and concat_origin on, the defaults): its
``label`` column holds the true labels, ``predict`` the predicted ones (other names: ``--truth`` /
``--predict``). Writes OUT.tsv (rows: true label, columns: predicted label, cells: counts, the run's class
order from the ``prob_<label>`` columns, then any label seen only in the data) and OUT.png (the same
counts as a heat map with the labels on both axes and the count in every cell), and prints the table.
x-eval's save_to_file holds one row of metrics per split, not per-sample predictions: run x-pred on the
split's raw file for this.
"""

from __future__ import annotations

import io as stdio

from xdpx import io
from xdpx.command import script
from xdpx.config.errors import ConfigError
from xdpx.io.ownership import record
from xdpx.scripts.result_tables import check_writable, read_predictions, split_flags, write_text

USAGE = "usage: x-script confusion_matrix PREDICTIONS OUT [--truth label] [--predict predict]"
CORNER = "true \\ predicted"


def count(truth: list[str], predicted: list[str], labels: list[str]) -> tuple[list[str], list[list[int]]]:
    """``(labels, counts)`` with ``counts[i][j]`` the samples of true label i predicted as label j; labels
    seen in the data but not in ``labels`` come last, sorted."""
    extra = sorted((set(truth) | set(predicted)) - set(labels))
    order = list(labels) + extra
    at = {label: i for i, label in enumerate(order)}
    counts = [[0] * len(order) for _ in order]
    for t, p in zip(truth, predicted):
        counts[at[t]][at[p]] += 1
    return order, counts


def to_tsv(labels: list[str], counts: list[list[int]]) -> str:
    rows = ["\t".join([CORNER, *labels])]
    rows += ["\t".join([label, *(str(c) for c in row)]) for label, row in zip(labels, counts)]
    return "\n".join(rows) + "\n"


def to_png(labels: list[str], counts: list[list[int]], title: str) -> bytes:
    """The heat map as PNG bytes: a cell's colour and number are its count."""
    import matplotlib  # lazy: matplotlib is heavy; x-script --help imports every tool

    matplotlib.use("Agg")
    from matplotlib import font_manager  # lazy: matplotlib is heavy; x-script --help imports every tool
    from matplotlib import pyplot as plt  # lazy: matplotlib is heavy; x-script --help imports every tool

    size = 2.5 + 0.6 * len(labels)
    figure, axes = plt.subplots(figsize=(size + 1, size), dpi=100)
    # a font with CJK glyphs where one is installed, so Chinese labels do not become boxes
    names = {f.name for f in font_manager.fontManager.ttflist}
    cjk = [n for n in ("Noto Sans CJK SC", "WenQuanYi Zen Hei", "SimHei", "Source Han Sans SC") if n in names]
    if cjk:
        plt.rcParams["font.sans-serif"] = [*cjk, "DejaVu Sans"]
    image = axes.imshow(counts, cmap="Blues")
    figure.colorbar(image, ax=axes, fraction=0.046)
    axes.set_xticks(range(len(labels)), labels, rotation=45 if max(map(len, labels)) > 4 else 0, ha="right")
    axes.set_yticks(range(len(labels)), labels)
    axes.set_xlabel("predicted")
    axes.set_ylabel("true")
    axes.set_title(title, fontsize=9)
    high = max((max(row) for row in counts), default=0)
    for i, row in enumerate(counts):
        for j, value in enumerate(row):
            axes.text(j, i, str(value), ha="center", va="center",
                      color="white" if high and value > high / 2 else "black")
    figure.tight_layout()
    buffer = stdio.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    return buffer.getvalue()


@script("confusion_matrix")
def main(argv: list[str]) -> int:
    """Confusion matrix of x-pred's predictions on a labelled input: OUT.tsv and OUT.png."""
    positional, flags = split_flags(argv, {"truth": "label", "predict": "predict"}, USAGE)
    if len(positional) != 2:
        raise ConfigError([USAGE])
    source, out = positional
    tsv, png = f"{out}.tsv", f"{out}.png"
    check_writable("confusion_matrix", [("OUT", tsv), ("OUT", png)], [("PREDICTIONS", source)])
    table = read_predictions(source, str(flags["truth"]), str(flags["predict"]))
    labels, counts = count(table.truth, table.predicted, table.labels)
    text = to_tsv(labels, counts)
    write_text("confusion_matrix", tsv, text)
    correct = sum(counts[i][i] for i in range(len(labels)))
    title = f"{source}: {len(table.truth)} samples, accuracy {correct / max(len(table.truth), 1):.4f}"
    with io.open(png, "wb") as f:
        f.write(to_png(labels, counts, title))
    record("confusion_matrix", png)
    print(text, end="")
    print(f"# {title}; wrote {tsv} and {png}")
    return 0
