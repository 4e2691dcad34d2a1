"""cutext: GPU/CPU text-analytics dataflow (BM25 index, LDA, n-gram language models, clustering).

The code lives in three subpackages, installed from the repository's folders of the same names:
``cutext.pipelines`` (the named jobs, ``run``, the CLI), ``cutext.stages`` (the dataflow below them) and
``cutext.kernels`` (CUDA kernels and their CPU twins).  ``import cutext`` itself loads none of them.

>>> import cutext
>>> from cutext import pipelines                     # doctest: +SKIP
"""
from cutext.kernels._version import __version__

__all__ = ["__version__"]
