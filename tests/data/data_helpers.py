"""Helpers for the x-prepro tests: write a config, run the command, read what it wrote."""

from __future__ import annotations

import json
from pathlib import Path

from xdpx.cli import run_chain

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "examples" / "data" / "sample"
CHINESE_VOCAB = SAMPLES / "vocab" / "chinese_vocab.txt"


def prepro(tmp_path: Path, name: str = "prepro", dry: bool = False, **options: object) -> int:
    """Write ``options`` as a config file under tmp_path and run x-prepro on it; the exit code."""
    path = tmp_path / f"{name}.hjson"
    path.write_text(json.dumps(options, ensure_ascii=False))
    return run_chain(["x-prepro", str(path)] + (["--dry"] if dry else []))


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def split_bytes(data_dir: Path) -> dict[str, bytes]:
    """Every binary, vocabulary and target map file of a data_dir (what must not depend on workers)."""
    return {p.name: p.read_bytes() for p in sorted(data_dir.iterdir())
            if p.suffix in (".bin", ".idx", ".npy") or p.name in ("vocab.txt", "target_map.txt")}
