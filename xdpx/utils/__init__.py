"""Small tools for users' own code: ``pdb`` (a debugger for worker processes and distributed runs) and
``distributed_utils`` (which process am I). Importing this package imports neither."""
