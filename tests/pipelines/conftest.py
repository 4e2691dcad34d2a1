"""Fixtures the lda pipeline's test files share: the real bag-of-words corpora of the shared data folder."""
from __future__ import annotations

import pytest

from cutext.stages.engines.lda_chunk import read_ldac


@pytest.fixture(scope="module")
def reuters_path(shared_data):
    """Reuters in LDA-C (395 docs, 4,258 words, 84,010 tokens)."""
    return shared_data / "bow" / "lda_reuters" / "reuters.ldac"


@pytest.fixture(scope="module")
def reuters(reuters_path):
    return read_ldac(reuters_path)


@pytest.fixture(scope="module")
def kos_path(shared_data):
    """The UCI KOS corpus (3,430 docs, 6,906 words, 467,714 tokens)."""
    return shared_data / "bow" / "uci" / "docword.kos.txt.gz"
