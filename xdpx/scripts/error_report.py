"""What x-script errors writes: three TSV files for tools and one self-contained HTML page for people (inline
CSS, no script, no image or font from anywhere: it opens offline, from a mail attachment as well)."""

from __future__ import annotations

import html
from typing import Any

from xdpx.io.tsv_cells import escape
from xdpx.scripts.error_analysis import ConfusedPair, LabelScores, Mistake

MISTAKES_FILE, PAIRS_FILE, LABELS_FILE, HTML_FILE = "mistakes.tsv", "confused_pairs.tsv", "per_label.tsv", "errors.html"


def _number(x: float) -> str:
    return f"{x:.4f}"


def mistakes_tsv(mistakes: list[Mistake], attributions: list[list[tuple[str, float]]] | None = None) -> str:
    """rank, index (the sample's position in the split), probability, gold_probability, gold, predicted, text
    (and attributions: ``token:score`` pairs separated by spaces, when given); cells escaped as x-pred's."""
    header = ["rank", "index", "probability", "gold_probability", "gold", "predicted", "text"]
    if attributions is not None:
        header.append("attributions")
    lines = ["\t".join(header)]
    for rank, m in enumerate(mistakes, start=1):
        cells = [str(rank), str(m.index), _number(m.probability), _number(m.gold_probability), escape(m.gold),
                 escape(m.predicted), escape(m.text)]
        if attributions is not None:
            cells.append(escape(" ".join(f"{token}:{score:.4f}" for token, score in attributions[rank - 1])))
        lines.append("\t".join(cells))
    return "\n".join(lines) + "\n"


def pairs_tsv(pairs: list[ConfusedPair]) -> str:
    lines = ["gold\tpredicted\tcount\tshare_of_gold"]
    lines += [f"{escape(p.gold)}\t{escape(p.predicted)}\t{p.count}\t{_number(p.share)}" for p in pairs]
    return "\n".join(lines) + "\n"


def labels_tsv(scores: list[LabelScores]) -> str:
    lines = ["label\tprecision\trecall\tf1\tsupport\tpredicted"]
    lines += [f"{escape(s.label)}\t{_number(s.precision)}\t{_number(s.recall)}\t{_number(s.f1)}\t{s.support}\t"
              f"{s.predicted}" for s in scores]
    return "\n".join(lines) + "\n"


_STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:70em;color:#222}
table{border-collapse:collapse;margin:0.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:0.25em 0.6em;text-align:left;vertical-align:top}
th{background:#f2f2f2} td.n{text-align:right;font-variant-numeric:tabular-nums}
.bar{display:inline-block;height:0.8em;background:#c0392b;vertical-align:middle;margin-right:0.4em}
.tok{border-radius:2px;padding:0 1px}
"""


def _shaded(tokens: list[tuple[str, float]]) -> str:
    """Tokens with a background whose strength is the attribution (green for, red against the prediction)."""
    high = max((abs(score) for _, score in tokens), default=0.0) or 1.0
    spans = []
    for token, score in tokens:
        colour = "46,160,67" if score >= 0 else "192,57,43"
        spans.append(f'<span class="tok" title="{score:.4f}" style="background:rgba({colour},'
                     f'{abs(score) / high:.2f})">{html.escape(token)}</span>')
    return " ".join(spans)


def summary_html(title: str, facts: dict[str, Any], mistakes: list[Mistake], pairs: list[ConfusedPair],
                 scores: list[LabelScores], attributions: list[list[tuple[str, float]]] | None = None) -> str:
    """The page: the facts of the run and split, per-label scores, confused pairs, confident mistakes."""
    e = html.escape
    parts = [f"<!doctype html><html lang=en><head><meta charset=utf-8><title>{e(title)}</title>",
             f"<style>{_STYLE}</style></head><body><h1>{e(title)}</h1><table>"]
    parts += [f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>" for k, v in facts.items()]
    parts.append("</table><h2>Per label</h2><table><tr><th>label</th><th>precision</th><th>recall</th><th>F1</th>"
                 "<th>support</th><th>predicted</th></tr>")
    parts += [f"<tr><td>{e(s.label)}</td><td class=n>{s.precision:.4f}</td><td class=n>{s.recall:.4f}</td>"
              f"<td class=n>{s.f1:.4f}</td><td class=n>{s.support}</td><td class=n>{s.predicted}</td></tr>"
              for s in scores]
    parts.append("</table><h2>Most confused pairs</h2>")
    if pairs:
        parts.append("<table><tr><th>gold</th><th>predicted as</th><th>count</th><th>share of gold</th></tr>")
        parts += [f"<tr><td>{e(p.gold)}</td><td>{e(p.predicted)}</td><td class=n>{p.count}</td>"
                  f"<td class=n>{p.share:.2%}</td></tr>" for p in pairs]
        parts.append("</table>")
    else:
        parts.append("<p>No mistakes.</p>")
    parts.append(f"<h2>The {len(mistakes)} most confident mistakes</h2>")
    if mistakes:
        parts.append("<table><tr><th>#</th><th>probability</th><th>gold</th><th>predicted</th><th>text</th></tr>")
        for rank, m in enumerate(mistakes, start=1):
            text = _shaded(attributions[rank - 1]) if attributions is not None else e(m.text)
            parts.append(f"<tr><td class=n>{rank}</td><td class=n><span class=bar style=\"width:{m.probability * 6:.2f}em\">"
                         f"</span>{m.probability:.3f}</td><td>{e(m.gold)} ({m.gold_probability:.3f})</td>"
                         f"<td>{e(m.predicted)}</td><td>{text}</td></tr>")
        parts.append("</table>")
    parts.append("</body></html>\n")
    return "".join(parts)
