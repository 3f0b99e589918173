"""Tasks: ``task = tasks.get(args.task)(args)`` builds the model and the loss and runs one step.

The interface the trainer codes against is in docs/architecture.md ("Model / loss / task contract").
Built-in tasks are imported on the first lookup, never at ``import xdpx`` time.
"""

from xdpx.registry import Registry

tasks = Registry("task", modules=("xdpx.tasks.default", "xdpx.tasks.freelb", "xdpx.tasks.ner",
                                   "xdpx.tasks.distill"))
