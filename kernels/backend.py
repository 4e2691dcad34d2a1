"""Backend probe and array/frame-module lookup.

The backend is decided once, at a pipeline's entry point (``run(..., backend=...)``); inside a
partition the library is always taken from the data (``type(obj).__module__``), never from
global state.  Nothing here imports cupy, cudf, rmm or dask_cuda at module import time, and the
probe never creates a CUDA context: it asks NVML (``pynvml``) or ``nvidia-smi`` whether a device
is visible, and ``importlib.util.find_spec`` whether cudf is installed.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from functools import lru_cache

import numpy as np

BACKENDS = ("auto", "cpu", "gpu")


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


def gpu_stack_installed() -> bool:
    """True when cudf and cupy are importable (checked with find_spec, nothing is imported)."""
    return all(importlib.util.find_spec(m) is not None for m in ("cudf", "cupy"))


def resolve_backend(backend: str = "auto") -> str:
    """Turn ``"auto" | "cpu" | "gpu"`` into the backend that will run.

    Parameters
    ----------
    backend : {"auto", "cpu", "gpu"}
        ``"auto"`` picks ``"gpu"`` when cudf and cupy are installed and a device is visible.

    Returns
    -------
    str
        ``"cpu"`` or ``"gpu"``.

    Raises
    ------
    ValueError
        Unknown backend name.
    RuntimeError
        ``"gpu"`` was asked for but cudf/cupy are missing or no device is visible.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    if backend == "cpu":
        return "cpu"
    ok_stack = gpu_stack_installed()
    ok_dev = device_count() > 0 if ok_stack else False
    if backend == "gpu":
        if not ok_stack:
            raise RuntimeError("backend='gpu' needs cudf and cupy (pip install 'cutext[gpu]')")
        if not ok_dev:
            raise RuntimeError("backend='gpu' but no CUDA device is visible "
                               f"(CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')!r})")
        return "gpu"
    return "gpu" if ok_dev else "cpu"


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
