"""The installed distribution's version, defined once for every layer.

``__version__`` is read from the package metadata (``pyproject.toml``'s ``version``) of the
``cutext`` distribution; it is ``"0+unknown"`` when cutext runs from a source tree that is not
installed. Pipelines stamp it into their output summaries (``index.json``, ``cluster.json``, ...).

It lives in the bottom layer so that any module of ``cutext.pipelines``, ``cutext.stages`` or
``cutext.kernels`` can import it without an import pointing upward.
"""
from __future__ import annotations

try:
    from importlib.metadata import version as _version

    __version__: str = _version("cutext")
except Exception:  # noqa: BLE001  # pragma: no cover (not installed)
    __version__ = "0+unknown"

__all__ = ["__version__"]
