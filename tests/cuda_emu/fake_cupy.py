"""A stand-in for ``cupy`` whose RawModule kernels run the CUDA C of a kernel source on the CPU.

Only what cutext's ELLPACK, trie and search paths and the segments' device merge use: ``ndarray`` (a numpy
subclass whose module is ``cupy``, so ``is_gpu_object`` sees a device array), ``asarray``, ``array``,
``ascontiguousarray``, ``empty``, ``zeros``, ``full``, ``arange``, ``searchsorted``, ``stack``, the dtype names,
``.get()`` (also into ``out=``), ``.set()``, ``cuda.Device`` (ids and a context manager; several "devices" share the
host), ``cuda.Event``, ``cuda.alloc_pinned_memory`` (a bytearray), ``cuda.get_current_stream`` and
``RawModule(...).get_function(name)(grid, block, args)``, which calls the launchers of the emulator
library (``ellpack_emu.cpp``, ``trie_emu.cpp``, ``search_emu.cpp``) through ctypes.  Used by
tests/emulated/ to run the GPU clustering engine (update buffer, micro-batches, capacity doubling, row
partitions), the trie queries and the search engine without a GPU, and by tests/stages/test_segments.py
(``make(None)``: arrays only) for ``merge_segments(device=True)``.
"""
from __future__ import annotations

import ctypes
import types

import numpy as np


class ndarray(np.ndarray):
    def get(self, stream=None, out=None, blocking=True):
        if out is None:
            return np.array(self, copy=True)
        out[...] = np.asarray(self)
        return out

    def set(self, arr, stream=None):
        assert np.shape(arr) == self.shape, "cupy's set copies an array of the same shape"
        self[...] = arr


ndarray.__module__ = "cupy"
_STREAM = types.SimpleNamespace(ptr=0)  # the one stream: the emulated kernels and copies run in call order


def _dev(a):
    return np.asarray(a).view(ndarray)


def asarray(a, dtype=None):
    return _dev(np.array(np.asarray(a), dtype=dtype, copy=True))


def array(a, dtype=None):
    return _dev(np.array(np.asarray(a), dtype=dtype, copy=True))


def ascontiguousarray(a, dtype=None):
    if isinstance(a, ndarray) and a.flags.c_contiguous and (dtype is None or a.dtype == np.dtype(dtype)):
        return a
    return _dev(np.ascontiguousarray(np.asarray(a), dtype=dtype))


def stack(arrays, axis=0):
    return _dev(np.stack([np.asarray(a) for a in arrays], axis=axis))


def empty(shape, dtype=float):
    return _dev(np.empty(shape, dtype))


def zeros(shape, dtype=float):
    return _dev(np.zeros(shape, dtype))


def full(shape, fill, dtype=None):
    return _dev(np.full(shape, fill, dtype))


def arange(*args, dtype=None):
    return _dev(np.arange(*args, dtype=dtype))


def searchsorted(a, v, side="left"):
    return _dev(np.searchsorted(np.asarray(a), np.asarray(v), side=side))


class _Device:
    current = 0
    attributes = {"MultiProcessorCount": 1}  # one "SM": the emulator runs ct_sequential's grid barrier as one block

    def __init__(self, device=None):
        self.id = _Device.current if device is None else int(device)
        self._prev = []

    def __enter__(self):
        self._prev.append(_Device.current)
        _Device.current = self.id
        return self

    def __exit__(self, *exc):
        _Device.current = self._prev.pop()

    def synchronize(self):
        pass


class _Event:
    """Every emulated launch and copy has finished when it returns: recording and waiting do nothing."""

    def record(self, stream=None):
        self.recorded = True

    def synchronize(self):
        assert getattr(self, "recorded", False), "an event waited for before it was recorded"


def make(lib_path):
    """The fake cupy module, its kernels running in the compiled emulator library ``lib_path``."""
    lib = ctypes.CDLL(str(lib_path)) if lib_path is not None else None  # None: arrays only, no kernels
    mod = types.ModuleType("cupy")
    mod.ndarray = ndarray
    mod.asarray = asarray
    mod.array = array
    mod.ascontiguousarray = ascontiguousarray
    mod.empty = empty
    mod.zeros = zeros
    mod.full = full
    mod.arange = arange
    mod.searchsorted = searchsorted
    mod.stack = stack
    for name in ("int8", "int32", "int64", "uint32", "float32", "float64"):
        setattr(mod, name, getattr(np, name))
    mod.cuda = types.SimpleNamespace(Device=_Device, Event=_Event, alloc_pinned_memory=bytearray,
                                     get_current_stream=lambda: _STREAM)
    launches = []

    def _arg(a):
        if isinstance(a, np.ndarray):
            assert isinstance(a, ndarray), "a host array was passed to a kernel"
            assert a.flags.c_contiguous
            return a.ctypes.data_as(ctypes.c_void_p)
        if isinstance(a, np.int64):
            return ctypes.c_longlong(int(a))
        if isinstance(a, np.int32):
            return ctypes.c_int(int(a))
        if isinstance(a, np.float64):
            return ctypes.c_double(float(a))
        raise TypeError(f"kernel argument of type {type(a).__name__}: pass numpy scalars of the C type")

    class RawModule:
        def __init__(self, code, options=()):
            assert "--fmad=false" in options
            self.code = code

        def get_function(self, name):
            fn = getattr(lib, f"launch_{name}")

            def launch(grid, block, args, shared_mem=0):
                grid = tuple(grid) + (1,) * (2 - len(grid))
                launches.append((name, grid))
                if grid[0] == 0 or grid[1] == 0:
                    raise ValueError(f"{name}: empty grid {grid}")
                fn(ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]), ctypes.c_uint(block[0]), *[_arg(a) for a in args])
            return launch

    mod.RawModule = RawModule
    mod.launches = launches
    return mod
