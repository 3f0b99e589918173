"""A few decoded samples of an x-prepro split, as the processor reads them back (x-prepro prints them
at the end; ``x-script show_data`` prints them on request)."""

from __future__ import annotations

from xdpx.config.options import Args
from xdpx.data.composition import build_processor
from xdpx.data.dataset import open_split
from xdpx.data.meta import read_meta
from xdpx.errors import UserError


def format_samples(data_dir: str, split: str, count: int = 5) -> list[str]:
    """Lines describing the first ``count`` samples of ``split`` as the processor decodes them."""
    meta = read_meta(data_dir)
    if meta is None:
        raise UserError(f"{data_dir} has no meta.hjson: is it an x-prepro data_dir?")
    args = Args({**meta, "data_dir": data_dir}, {}, set(), {})
    processor = build_processor(args, data_dir=data_dir)
    dataset = open_split(data_dir, split)
    lines = [f"{data_dir} {split}: {len(dataset)} samples, processor {meta['processor']}, "
             f"tokenizer {meta['tokenizer']}"]
    for i in range(min(count, len(dataset))):
        sample = dataset[i]
        target = f"  -> {processor.decode_target(sample['target'])}" if "target" in sample else ""
        lines.append(f"[{sample['id']}] {processor.decode(sample)}{target}")
    return lines
