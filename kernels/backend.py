"""Backend probe, the one backend resolver, and array/frame-module lookup.

The backend is decided once, at an entry point (``run(..., backend=...)``, a model's ``load``),
by :func:`resolve_backend`, and travels in one of two forms only:

* at the edges (entry points, readers that create partitions, results and JSON): the resolved
  string ``"cpu"`` or ``"gpu"``;
* inside partitions and arrays: the data's own type (pandas/numpy or cudf/cupy), read with
  :func:`is_gpu_object`, :func:`array_module`, :func:`meta` (``like=`` the data) and
  :func:`to_host`; never a ``gpu`` bool, never global state.

Nothing here imports cupy, cudf, rmm or dask_cuda at module import time, and the probe never
creates a CUDA context: it asks NVML (``pynvml``) or ``nvidia-smi`` whether a device is visible,
and ``importlib.util.find_spec`` whether cudf / cupy are installed.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
import shutil
import subprocess
from functools import lru_cache

import numpy as np

BACKENDS = ("auto", "cpu", "gpu")
FRAME_STACK = ("cudf", "cupy")  # what the dataframe pipelines (read, tokenize, encode, count) need
ARRAY_STACK = ("cupy",)  # what the array-only models need (BM25 search, n-gram trie, LDA, clustering)


def _visible_devices_env() -> list[str] | None:
    """Devices allowed by ``CUDA_VISIBLE_DEVICES`` (None when unset)."""
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    if env is None:
        return None
    env = env.strip()
    if env in ("", "-1", "NoDevFiles"):
        return []
    return [x.strip() for x in env.split(",") if x.strip()]


@lru_cache(maxsize=1)
def device_count() -> int:
    """Number of CUDA devices visible to this process, without creating a CUDA context.

    Returns
    -------
    int
        0 when no driver, no device, or ``CUDA_VISIBLE_DEVICES`` hides them all.
    """
    allowed = _visible_devices_env()
    if allowed == []:
        return 0
    n = 0
    try:  # NVML talks to the driver, not the CUDA runtime: no context is created
        import pynvml  # type: ignore

        pynvml.nvmlInit()
        try:
            n = int(pynvml.nvmlDeviceGetCount())
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        smi = shutil.which("nvidia-smi")
        if smi:
            try:
                out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
                n = sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))
            except Exception:
                n = 0
    if allowed is not None:
        n = min(n, len(allowed))
    return n


def gpu_stack_installed(needs=FRAME_STACK) -> bool:
    """True when the modules ``needs`` (default cudf and cupy) are importable (find_spec; nothing is imported)."""
    return all(importlib.util.find_spec(m) is not None for m in needs)


def resolve_backend(backend: str = "auto", *, needs=FRAME_STACK) -> str:
    """Turn ``"auto" | "cpu" | "gpu"`` into the backend that will run: the one resolver.

    Every entry point and every loader calls this once (pipelines, ``BM25Index.load``,
    ``NGramModel.load``, ``LDAModel.transform``, ``StreamClusterer``); past it the backend is the
    string ``"cpu"``/``"gpu"`` at the edges and the data's type inside partitions.

    Parameters
    ----------
    backend : {"auto", "cpu", "gpu"}
        ``"auto"`` picks ``"gpu"`` when the modules ``needs`` are installed and a device is
        visible, and falls back to ``"cpu"`` otherwise, also when the probe itself fails (a broken
        driver, an unreadable ``find_spec``): ``"auto"`` never raises.
    needs : tuple of str
        Modules the GPU path of the caller imports: :data:`FRAME_STACK` (cudf and cupy, the
        dataframe pipelines) or :data:`ARRAY_STACK` (cupy only, the array-only models).

    Returns
    -------
    str
        ``"cpu"`` or ``"gpu"``.

    Raises
    ------
    ValueError
        Unknown backend name.
    RuntimeError
        ``"gpu"`` was asked for but a module of ``needs`` is missing or no device is visible.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "cpu":
        return "cpu"
    if backend == "auto":
        try:
            return "gpu" if gpu_stack_installed(needs) and device_count() > 0 else "cpu"
        except (ImportError, RuntimeError, OSError, ValueError):
            return "cpu"
    if not gpu_stack_installed(needs):
        extra = " (pip install 'cutext[gpu]')" if "cudf" in needs else ""
        raise RuntimeError(f"backend='gpu' needs {' and '.join(needs)}{extra}")
    if device_count() == 0:
        raise RuntimeError("backend='gpu' but no CUDA device is visible "
                           f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
    return "gpu"


def is_gpu_object(obj) -> bool:
    """True for cudf / cupy objects, judged by the object's module (no import happens)."""
    mod = type(obj).__module__ or ""
    return mod.startswith(("cudf", "cupy", "dask_cudf"))


def array_module(obj):
    """numpy or cupy, taken from the data.

    Parameters
    ----------
    obj : numpy.ndarray, cupy.ndarray, pandas or cudf object
    """
    if is_gpu_object(obj):
        import cupy

        return cupy
    return np


def is_gpu(like) -> bool:
    """Whether ``like`` stands for the GPU backend.

    Parameters
    ----------
    like : {"cpu", "gpu"}, or data
        A resolved backend string (the form at the edges), or data: a pandas/cudf object, a
        numpy/cupy array, or a dask collection (judged by its ``_meta``).

    Raises
    ------
    ValueError
        A string other than ``"cpu"`` / ``"gpu"`` (``"auto"`` must be resolved first).
    """
    if isinstance(like, str):
        if like not in ("cpu", "gpu"):
            raise ValueError(f"expected a resolved backend 'cpu' or 'gpu' (resolve 'auto' first), got {like!r}")
        return like == "gpu"
    inner = getattr(like, "_meta", None)
    return is_gpu_object(like if inner is None else inner)


def to_host(x):
    """The host copy of ``x``: cudf -> pandas, cupy -> numpy; host data is returned as is (no copy).

    Parameters
    ----------
    x : cudf DataFrame / Series / Index, cupy array, or any host object

    Returns
    -------
    pandas object, numpy array, or ``x`` itself
    """
    if not is_gpu_object(x):
        return x
    if hasattr(x, "to_pandas"):
        return x.to_pandas()
    return x.get()


# dtypes of the long tables of the data model (DESIGN.md): "string" = pandas' pyarrow string
# dtype on the host, cudf's string column on the GPU
SCHEMAS = {
    "corpus": (("source_id", "string"), ("text", "string"), ("replaced", "int32")),
    "tokens": (("doc_id", "int64"), ("token", "string")),
    "encoded": (("doc_id", "int64"), ("term_id", "int32")),
    "counts": (("term_id", "int32"), ("doc_id", "int64"), ("tf", "int32"), ("dl", "int32")),
    "vocabulary": (("token", "string"), ("term_id", "int32")),
}


def meta(kind_or_columns, like="cpu"):
    """An empty frame of a long table, of the library ``like`` stands for (the ``meta=`` of dask).

    Parameters
    ----------
    kind_or_columns : str or sequence of (name, dtype)
        A table of :data:`SCHEMAS`: ``"corpus"`` (source_id: string, text: string, replaced: int32),
        ``"tokens"`` (doc_id: int64, token: string), ``"encoded"`` (doc_id: int64, term_id: int32),
        ``"counts"`` (term_id: int32, doc_id: int64, tf: int32, dl: int32), ``"vocabulary"``
        (token: string, term_id: int32); or the columns themselves (``"string"`` or a numpy dtype;
        a dict works too).
    like : {"cpu", "gpu"} or data
        See :func:`is_gpu`: pandas for ``"cpu"`` / host data, cudf for ``"gpu"`` / device data.

    Returns
    -------
    pandas.DataFrame or cudf.DataFrame with zero rows.

    Raises
    ------
    ValueError
        Unknown table name or backend string.
    """
    import pandas as pd

    if isinstance(kind_or_columns, str):
        if kind_or_columns not in SCHEMAS:
            raise ValueError(f"unknown table {kind_or_columns!r}; known: {sorted(SCHEMAS)}")
        cols = SCHEMAS[kind_or_columns]
    else:
        cols = kind_or_columns.items() if isinstance(kind_or_columns, dict) else kind_or_columns
    frame = pd.DataFrame({name: pd.Series([], dtype=pd.StringDtype("pyarrow") if dt == "string" else np.dtype(dt))
                          for name, dt in cols})
    return to_cudf(frame) if is_gpu(like) else frame


def values(series):
    """The array behind a pandas/cudf Series: numpy for pandas, cupy for cudf (no host copy)."""
    if is_gpu_object(series):
        return series.values  # cupy
    return series.to_numpy()


def to_cudf(obj):
    """pandas DataFrame/Series or pyarrow Array -> cudf (whichever constructor this cudf has)."""
    import cudf
    import pandas as pd
    import pyarrow as pa

    if isinstance(obj, (pa.Array, pa.ChunkedArray)):
        from_arrow = getattr(cudf.Series, "from_arrow", None)
        if from_arrow is not None:
            return from_arrow(obj)
        return cudf.Series(obj)
    fn = getattr(cudf, "from_pandas", None)
    if fn is not None:
        return fn(obj)
    if isinstance(obj, pd.DataFrame):
        return cudf.DataFrame(obj)
    return cudf.Series(obj)


@contextlib.contextmanager
def numba_threads(n_threads=None):
    """Run the enclosed numba ``prange`` code on ``n_threads`` threads (default: numba's current setting),
    restoring the setting after; yields the number of threads in effect.

    Raises
    ------
    ValueError
        ``n_threads`` outside ``[1, numba.config.NUMBA_NUM_THREADS]``.
    """
    import numba

    prev = numba.get_num_threads()
    nth = prev if n_threads is None else int(n_threads)
    if not 1 <= nth <= numba.config.NUMBA_NUM_THREADS:
        raise ValueError(f"n_threads must be in [1, {numba.config.NUMBA_NUM_THREADS}], got {n_threads}")
    numba.set_num_threads(nth)
    try:
        yield nth
    finally:
        numba.set_num_threads(prev)
