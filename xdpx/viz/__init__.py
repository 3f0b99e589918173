"""x-viz: reading a run's logs (runs.py), aligning runs by samples seen (align.py), the figures
(plots.py, matplotlib imported lazily) and the command (command.py). See docs/viz.md."""
