"""Fixtures of the kernel tests (tests/kernels/)."""
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tokenize_emu(tmp_path_factory):
    """kernels/tokenize.cu compiled under tests/cuda_emu/tokenize_emu.cpp (ctypes library; built once
    for the session's tests of the tokenizer and the GPU text path kernels)."""
    import ctypes

    from cutext.kernels import tokenize as K

    from helpers import build_cuda_emulation

    lib = build_cuda_emulation(tmp_path_factory.mktemp("tokenize_emu"), Path(K.__file__).with_name("tokenize.cu"),
                               "tokenize_emu.cpp", std="c++17", flags=("-O1",))
    return ctypes.CDLL(str(lib))
