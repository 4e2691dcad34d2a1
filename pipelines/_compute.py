"""Where a pipeline computes: re-exported from :mod:`cutext.stages.compute` (the one scheduler policy).

The policy moved down to ``stages/`` so that the corpus front end (:mod:`cutext.stages.corpus`) runs
inside it without an import pointing up; pipelines keep importing it from here or from stages.
"""
from cutext.stages.compute import (  # noqa: F401
    SCHEDULERS,
    SMALL_INPUT_BYTES,
    ComputeInfo,
    compute_context,
    input_bytes,
    materialize,
)
