"""The CUDA kernel loader's builds with extra nvrtc options (kernels/_cuda.py), without a device."""
from __future__ import annotations

import pytest

from cutext.kernels import _cuda


def test_options_build_with_the_extra_nvrtc_options_and_forward_the_rest(monkeypatch):
    seen = []

    def kernel(name, function, options=_cuda.COMPILE_OPTIONS):
        seen.append((name, function, options))
        return "handle"

    monkeypatch.setattr(_cuda, "kernel", kernel)
    built = _cuda.Options(["-DSB_TILE=1024", "-DSB_QT=1"])
    assert built.kernel("search.cu", "bm25_block_search") == "handle"
    assert seen == [("search.cu", "bm25_block_search", _cuda.COMPILE_OPTIONS + ("-DSB_TILE=1024", "-DSB_QT=1"))]
    assert built.grid(300) == _cuda.grid(300) and built.THREADS == _cuda.THREADS
    with pytest.raises(AttributeError, match="no_such_name"):
        built.no_such_name  # noqa: B018  (the attribute access is what must raise)
