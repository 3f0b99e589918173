"""``x-submit``: check a chain of commands like ``--dry``, then run it on a Slurm cluster.

The chain is validated in this process exactly as ``x-train config.hjson --dry`` would validate it;
only then is a job script written (:mod:`xdpx.submit.script`), tried with ``sbatch --test-only`` and
submitted (:mod:`xdpx.submit.slurm`), and the submission recorded in command_history.txt
(:mod:`xdpx.submit.history`). docs/submit.md is the user guide.
"""
