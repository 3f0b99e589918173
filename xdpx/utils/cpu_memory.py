"""Keep freed memory in the process on the CPU (glibc's malloc) instead of giving it back after each
update or batch.

glibc serves allocations above its mmap threshold (at most 32 MiB by default) with a fresh mmap and
unmaps them when freed. An update frees and reallocates the same large tensors every time: MiniLM's
word-embedding gradient alone is 30,522 x 384 fp32 = 47 MB, so each update page-faulted 11,000 fresh
pages that the kernel zeroes before torch zeroes them again (torch.zeros of that size: 25 ms against
3.5 ms for zeroing a reused buffer, one thread, load average ~7). Raising the mmap and trim thresholds
keeps such blocks in malloc's heap, where the next update reuses them; this is what the jemalloc /
tcmalloc advice of torch's CPU performance guide achieves, without preloading another allocator.
Peak memory is unchanged (the same tensors are alive at once); freed memory is kept for reuse.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

# mallopt parameters (glibc's malloc.h)
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
THRESHOLD = 1 << 30  # blocks up to 1 GiB come from (and return to) the heap

_done: list[bool] = []


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds once per process; False where malloc is not glibc's."""
    if _done:
        return _done[0]
    ok = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            mallopt = libc.mallopt
        except (OSError, AttributeError):  # musl and other C libraries have no mallopt
            mallopt = None
        if mallopt is not None:
            mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
            ok = bool(mallopt(M_MMAP_THRESHOLD, THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, THRESHOLD))
    _done.append(ok)
    return ok
