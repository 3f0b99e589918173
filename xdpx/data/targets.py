"""Targets: the target map (target_map.txt, one label per line, the line number is the class id) and
the conversion of a label string into what is stored (class id, or a float for regression)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from xdpx import io
from xdpx.data.errors import BadLine


class TargetMap:
    """Class labels <-> class ids."""

    def __init__(self, labels: Iterable[str]) -> None:
        self.labels = list(labels)
        self.index = {label: i for i, label in enumerate(self.labels)}
        if len(self.index) != len(self.labels):
            raise ValueError("the target map lists a label twice")

    @classmethod
    def load(cls, path: str) -> TargetMap:
        with io.open(path) as f:
            return cls(line.rstrip("\r\n") for line in f if line.strip())

    @classmethod
    def build(cls, counts: Counter[str], target_type: str, special_targets: Iterable[str] = ()) -> TargetMap:
        """``special_targets`` first; then, for ``text``, labels by frequency (ties alphabetical); for
        ``index``, labels by numeric value (they should be 0..n-1)."""
        special = list(special_targets)
        rest = [label for label in counts if label not in special]
        if target_type == "index":
            bad = [label for label in rest if not _is_int(label)]
            if bad:
                raise BadLine(f"target_type 'index' needs integer labels, got {bad[:3]}")
            rest.sort(key=int)
        else:
            rest.sort(key=lambda label: (-counts[label], label))
        return cls(special + rest)

    def save(self, path: str) -> None:
        with io.open(path, "w") as f:
            f.writelines(f"{label}\n" for label in self.labels)

    def __len__(self) -> int:
        return len(self.labels)

    def encode(self, label: str) -> int:
        try:
            return self.index[label]
        except KeyError:
            raise BadLine(f"label {label!r} is not in the target map {self.labels[:10]}") from None


def _is_int(text: str) -> bool:
    try:
        int(text)
        return True
    except ValueError:
        return False


def regression_value(label: str) -> float:
    try:
        value = float(label)
    except ValueError:
        raise BadLine(f"target_type 'regression' needs a number, got label {label!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise BadLine(f"target {label!r} is not a finite number")
    return value
