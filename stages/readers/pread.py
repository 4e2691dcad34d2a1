"""Parallel ``preadv`` of a byte range of a file into host memory or, through pinned staging buffers, into
device memory (the device readers' host side, :mod:`cutext.stages.readers.device`).
"""
from __future__ import annotations

import numpy as np

READ_THREADS = 8
READ_CHUNK = 8 << 20


def _pread_chunk(fd: int, mv, offset: int) -> None:
    """Fill the memoryview ``mv`` with the file's bytes from ``offset`` (``os.preadv`` until full).

    Raises
    ------
    EOFError
        The file ends before ``mv`` is full (it changed since it was sized).
    """
    import os

    a, e = 0, len(mv)
    while a < e:
        got = os.preadv(fd, [mv[a:]], offset + a)
        if got <= 0:
            raise EOFError(f"file ended {e - a} bytes early")
        a += got


def _pread_into(fd: int, out: np.ndarray, offset: int, threads: int = READ_THREADS) -> None:
    """Fill ``out`` with the file's bytes from ``offset`` by ``os.preadv`` in parallel chunks
    (the GIL is released while the kernel copies from the page cache or the disk).

    Raises
    ------
    EOFError
        The file ends before ``out`` is full (it changed since it was sized).
    """
    from concurrent.futures import ThreadPoolExecutor

    mv = memoryview(out)

    def fill(a: int) -> None:
        _pread_chunk(fd, mv[a:a + READ_CHUNK], offset + a)

    starts = list(range(0, len(out), READ_CHUNK))
    if len(starts) <= 1 or threads <= 1:
        for a in starts:
            fill(a)
        return
    with ThreadPoolExecutor(min(threads, len(starts))) as pool:
        list(pool.map(fill, starts))


def _pread_to_device(fd: int, dst, offset: int, threads: int = READ_THREADS) -> None:
    """Fill the device array ``dst`` (cupy uint8) with the file's bytes from ``offset``: chunks of
    ``READ_CHUNK`` bytes are read by ``os.preadv`` into a pinned staging buffer of the thread that
    reads them and copied to the device from there (``cudaMemcpyAsync`` on a non-blocking stream of the
    buffer, then synchronized: ~55 GB/s from pinned memory; a copy on the legacy default stream would
    wait for every kernel queued there, e.g. a Parquet writer's on another thread).

    The staging buffers (``threads x READ_CHUNK``, 64 MiB) come from CuPy's pinned pool, which
    reuses blocks of one size: a piece of any size pins nothing new after the first read.  Pinning
    a buffer of the piece's size instead (``cudaHostAlloc``, page by page) cost more than the copy:
    the pool reuses only blocks of the same size, and pieces differ by their last line.

    Raises
    ------
    EOFError
        The file ends before ``dst`` is full (it changed since it was sized).
    """
    import queue
    from concurrent.futures import ThreadPoolExecutor

    import cupy

    n = len(dst)
    starts = list(range(0, n, READ_CHUNK))
    if not starts:
        return
    k = max(1, min(threads, len(starts)))
    free = queue.SimpleQueue()
    for _ in range(k):  # a staging buffer and a stream of its own: no copy waits for the device's other work
        free.put((_pinned(READ_CHUNK, np.uint8), cupy.cuda.Stream(non_blocking=True)))
    # dst was allocated on the current stream; the copies below run on streams of their own
    cupy.cuda.get_current_stream().synchronize()
    h2d = cupy.cuda.runtime.memcpyHostToDevice

    def fill(a: int) -> None:
        host, stream = free.get()
        try:
            m = min(READ_CHUNK, n - a)
            _pread_chunk(fd, memoryview(host)[:m], offset + a)
            cupy.cuda.runtime.memcpyAsync(dst.data.ptr + a, host.ctypes.data, m, h2d, stream.ptr)
            stream.synchronize()  # the staging buffer is reused once this returns
        finally:
            free.put((host, stream))

    if k == 1:
        for a in starts:
            fill(a)
        return
    with ThreadPoolExecutor(k) as pool:
        list(pool.map(fill, starts))


def _pinned(n, dtype):
    """``n`` items of pinned host memory from CuPy's pinned pool, the block rounded up to a multiple of
    ``READ_CHUNK`` bytes: the pool reuses only blocks of the same size, so pieces that differ by their
    last line share blocks."""
    import cupy

    nbytes = int(n) * np.dtype(dtype).itemsize
    mem = cupy.cuda.alloc_pinned_memory(max(-(-nbytes // READ_CHUNK) * READ_CHUNK, READ_CHUNK))
    return np.frombuffer(mem, dtype, int(n))
