"""The malformed-input corpus of tests/reliability: one small input per kind of damage, generated here
(the bytes are the test), and what x-prepro and x-pred must do with each.

Every kind ends in one of three ways, never in exit 0 with wrong data:
- ``error``: exit 1 with ``file:line: reason`` (``file: reason`` for a whole-file problem), nothing written;
- ``skip``: with ``skip_bad_lines`` the damaged lines are skipped and counted (the exact number is checked),
  or the run stops because too many were (``max_bad_fraction``);
- ``ok``: the input is valid after all (CRLF, BOM, an over-long line) and gives exactly the clean data.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdpx.cli import run_chain

WORDS = ["good", "bad", "film", "plot", "cast", "slow", "fun", "dull", "great", "poor", "story", "music"]


def clean_rows(n: int = 40, seed: int = 0) -> list[tuple[str, str]]:
    """``n`` (text, label) rows of two to four words; labels alternate so each occurs often."""
    rng = random.Random(seed)
    return [(" ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 4))), "pos" if i % 2 else "neg")
            for i in range(n)]


def tsv(rows: list[tuple[str, ...]], end: bytes = b"\n") -> bytes:
    return b"".join("\t".join(row).encode() + end for row in rows)


def jsonl(rows: list[tuple[str, str]]) -> bytes:
    return b"".join(json.dumps({"text": t, "label": y}).encode() + b"\n" for t, y in rows)


def with_line(data: bytes, number: int, line: bytes) -> bytes:
    """``data`` with ``line`` inserted as line ``number`` (1-based)."""
    lines = data.split(b"\n")
    return b"\n".join(lines[: number - 1] + [line] + lines[number - 1:])


@dataclass
class Kind:
    """One kind of damaged input. ``files`` maps a file name of data_source to its bytes; ``bad`` is the
    file:line (relative name) the error must name, or a whole-file reason; ``skipped`` how many lines
    skip_bad_lines must skip (None: skipping cannot save this input)."""

    name: str
    files: dict[str, bytes]
    outcome: str  # error | ok
    message: str = ""  # a piece of the error message (after file:line)
    where: str = ""  # "train.txt:5": the error names this place
    skipped: int | None = None
    options: dict[str, Any] = field(default_factory=dict)
    samples: int | None = None  # ok: the samples of train
    pred_message: str | None = None  # what x-pred says, where it differs from x-prepro


def prepro_kinds() -> list[Kind]:
    rows = clean_rows()
    train = tsv(rows)
    dev = tsv(clean_rows(30, seed=1))
    json_opts = {"parser": "jsonl", "fields": ["text", "label"], "data_files": "*.jsonl"}
    rng = random.Random(7)
    garbage = b"".join(bytes(rng.choice([b for b in range(256) if b != 10]) for _ in range(40)) + b"\n"
                       for _ in range(96))
    utf16 = "".join(f"{t}\t{y}\n" for t, y in rows).encode("utf-16-le")
    return [
        Kind("extra column", {"train.txt": with_line(train, 5, b"a text\twith a tab\tpos")}, "error",
             "3 columns, but the first record of the file (line 1) has 2", "train.txt:5", skipped=1),
        Kind("missing column", {"train.txt": with_line(train, 5, b"no label here")}, "error",
             "expected at least 2 columns", "train.txt:5", skipped=1),
        Kind("empty file", {"train.txt": b""}, "error", "empty file", "train.txt"),
        Kind("only blank lines", {"train.txt": b"\n\n\n"}, "error", "empty text", "train.txt:1"),
        Kind("header line", {"train.txt": b"text\tlabel\n" + train}, "error",
             "label 'label' occurs only on this first line", "train.txt:1", skipped=1,
             pred_message="label 'label' is not in the target map"),
        Kind("NUL bytes", {"train.txt": with_line(train, 5, b"bad\x00text\tpos")}, "error",
             "a NUL character in the text", "train.txt:5", skipped=1),
        Kind("UTF-16 without BOM", {"train.txt": utf16}, "error", "a NUL character", "train.txt:1"),
        Kind("UTF-16 with BOM", {"train.txt": b"\xff\xfe" + utf16}, "error", "bytes that are not UTF-8",
             "train.txt:1"),
        Kind("binary garbage", {"train.txt": garbage}, "error", "", "train.txt:"),
        Kind("invalid UTF-8", {"train.txt": with_line(train, 5, b"bro\xffken\tneg")}, "error",
             "bytes that are not UTF-8 at position 3", "train.txt:5", skipped=1),
        Kind("deeply nested jsonl", {"train.jsonl": with_line(jsonl(rows), 3, b"[" * 100_000)}, "error",
             "invalid JSON: nested too deeply", "train.jsonl:3", skipped=1, options=json_opts),
        Kind("5,000-digit JSON number", {"train.jsonl": with_line(jsonl(rows), 3,
                                                                 b'{"text": "a b", "label": ' + b"7" * 5000 + b"}")},
             "error", "a JSON number of 5000 digits, more than Python reads (4300)", "train.jsonl:3", skipped=1,
             options=json_opts),
        Kind("lone surrogate in JSON", {"train.jsonl": with_line(jsonl(rows), 3, b'{"text": "a \\ud800 b", '
                                                                                 b'"label": "pos"}')},
             "error", "a lone surrogate (U+D800) in the text at position 2", "train.jsonl:3", skipped=1,
             options=json_opts),
        Kind("bad JSON", {"train.jsonl": with_line(jsonl(rows), 3, b'{"text": "oops", ')}, "error",
             "invalid JSON", "train.jsonl:3", skipped=1, options=json_opts),
        Kind("jsonl missing field", {"train.jsonl": with_line(jsonl(rows), 3, b'{"label": "pos"}')}, "error",
             "missing field(s) ['text']", "train.jsonl:3", skipped=1, options=json_opts),
        Kind("json array cut short", {"train.json": b'[{"text": "a b", "label": "pos"}, {"te'}, "error",
             "invalid JSON file", "train.json", options={**json_opts, "parser": "json", "data_files": "*.json"}),
        Kind("CR line ends (old Mac)", {"train.txt": tsv(rows, b"\r")}, "error", "a carriage return", "train.txt:1"),
        Kind("label only in dev", {"train.txt": train, "dev.txt": with_line(dev, 3, b"so so\tneutral")}, "error",
             "label 'neutral' is not in the target map", "dev.txt:3", skipped=1),
        Kind("label differing only by case", {"train.txt": with_line(train, 5, b"a text\tPos")}, "error",
             "label 'Pos' (1 train sample(s)) differs from 'pos' (20, first at ", "train.txt:5", skipped=1,
             pred_message="label 'Pos' is not in the target map"),
        Kind("label of 300 characters", {"train.txt": with_line(train, 5, b"a text\t" + b"p" * 300)}, "error",
             "a label of 300 characters ('pppp", "train.txt:5", skipped=1),
        Kind("empty text", {"train.txt": with_line(train, 5, b" \tpos")}, "error", "empty text", "train.txt:5",
             skipped=1),
        Kind("empty label", {"train.txt": with_line(train, 5, b"some text\t ")}, "error", "empty label",
             "train.txt:5", skipped=1),
        Kind("blank line inside", {"train.txt": with_line(train, 5, b"")}, "error", "expected at least 2 columns",
             "train.txt:5", skipped=1),
        Kind("non-numeric regression target", {"train.txt": with_line(tsv([(t, "1.5") for t, _ in rows]), 5,
                                                                        b"a text\thigh")},
             "error", "needs a number, got label 'high'", "train.txt:5", skipped=1,
             options={"target_type": "regression"}),
        Kind("NaN regression target", {"train.txt": with_line(tsv([(t, "1.5") for t, _ in rows]), 5, b"a text\tnan")},
             "error", "is not a finite number", "train.txt:5", skipped=1, options={"target_type": "regression"}),
        Kind("too many bad lines (240 of 241)", {"train.txt": tsv(rows[:1]) + b"no label\n" * 240}, "error",
             "expected at least 2 columns", "train.txt:2"),
        Kind("every text shorter than min_len", {"train.txt": tsv([("one", y) for _, y in rows])}, "error",
             "no samples from 40 line(s)", "train.txt", options={"min_len": 2}),
        Kind("CRLF line ends", {"train.txt": tsv(rows, b"\r\n")}, "ok", samples=40),
        Kind("mixed line ends", {"train.txt": tsv(rows[:20], b"\r\n") + tsv(rows[20:])}, "ok", samples=40),
        Kind("UTF-8 BOM", {"train.txt": b"\xef\xbb\xbf" + train}, "ok", samples=40),
        Kind("over-long line", {"train.txt": with_line(train, 5, " ".join(["film"] * 100_000).encode() + b"\tpos")},
             "ok", samples=41),
    ]


PREPRO_BASE = {"processor": "single", "loader": "single", "tokenizer": "space", "max_len": 16, "threshold": 0,
               "workers": 1}


def write_json(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config, ensure_ascii=False), encoding="utf-8")
    return path


def run(command: str, config_path: Path, capsys: Any) -> tuple[int, str, str]:
    """Run one command in this process; (exit code, stdout, stderr)."""
    capsys.readouterr()
    code = run_chain([command, str(config_path)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def write_files(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return folder
