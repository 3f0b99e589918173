"""``x-script show_data DATA_DIR SPLIT [N]``: print N decoded samples of a split (tokens and target)."""

from __future__ import annotations

from xdpx.command import script


def format_samples(data_dir: str, split: str, count: int = 5) -> list[str]:
    """Lines describing the first ``count`` samples of ``split`` as the processor decodes them."""
    from xdpx.config.options import Args
    from xdpx.data import processors
    from xdpx.data.dataset import open_split
    from xdpx.data.meta import read_meta

    meta = read_meta(data_dir)
    if meta is None:
        from xdpx.cli import UserError

        raise UserError(f"{data_dir} has no meta.hjson: is it an x-prepro data_dir?")
    args = Args({**meta, "data_dir": data_dir}, {}, set(), {})
    processor = processors.get(meta["processor"])(args, data_dir=data_dir)
    dataset = open_split(data_dir, split)
    lines = [f"{data_dir} {split}: {len(dataset)} samples, processor {meta['processor']}, "
             f"tokenizer {meta['tokenizer']}"]
    for i in range(min(count, len(dataset))):
        sample = dataset[i]
        target = f"  -> {processor.decode_target(sample['target'])}" if "target" in sample else ""
        lines.append(f"[{sample['id']}] {processor.decode(sample)}{target}")
    return lines


@script("show_data")
def main(argv: list[str]) -> int:
    """Print decoded samples of an x-prepro split: x-script show_data DATA_DIR SPLIT [N]."""
    if len(argv) not in (2, 3) or (len(argv) == 3 and not argv[2].isdigit()):
        print("usage: x-script show_data DATA_DIR SPLIT [N]")
        return 2
    for line in format_samples(argv[0], argv[1], int(argv[2]) if len(argv) == 3 else 5):
        print(line)
    return 0
