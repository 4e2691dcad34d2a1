"""Parameter checks shared by the pipelines and stages: a parameter is used or refused, never ignored.

Every check raises an error that names the parameter, the value and the accepted range:

>>> count("K", 2.7, lo=2)
Traceback (most recent call last):
...
ValueError: K must be an integer >= 2, got 2.7
"""
from __future__ import annotations

import difflib
import inspect
import math
import numbers

__all__ = ["UnknownParameterError", "check_keywords", "keywords_of", "count", "number", "choice"]


# names other libraries of the field use for our parameters (gensim, tomotopy, sklearn, bm25s, KenLM)
SYNONYMS = {"n_topics": "K", "num_topics": "K", "topics": "K", "k": "K", "n_components": "K",
            "n_iter": "iterations", "iter": "iterations", "iters": "iterations", "max_iter": "iterations",
            "passes": "iterations", "eta": "beta", "num_workers": "n_workers", "workers": "n_workers",
            "method": "variant", "arpa": "model", "lm": "model", "output": "out", "out_dir": "out",
            "column": "text_column", "text_col": "text_column", "id_col": "id_column", "stem": "stemmer",
            "stopword": "stopwords", "stop_words": "stopwords", "lower": "lowercase", "device": "backend"}


class UnknownParameterError(TypeError):
    """A keyword that the pipeline (or function) does not take; the message suggests the closest valid one."""


def keywords_of(*functions, exclude=()) -> set:
    """Names of the keyword parameters of ``functions`` (positional-only and ``**kwargs`` left out)."""
    names = set()
    for fn in functions:
        for p in inspect.signature(fn).parameters.values():
            if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
                names.add(p.name)
    return names - set(exclude)


def check_keywords(owner: str, given, valid) -> None:
    """Refuse keywords not in ``valid``.

    Parameters
    ----------
    owner : str
        Who takes them, for the message (``"pipeline 'lda'"``).
    given : iterable of str
    valid : iterable of str

    Raises
    ------
    UnknownParameterError (TypeError)
        Names ``owner``, every unknown keyword, the closest valid name (``difflib``) and the valid names.
    """
    valid = sorted(set(valid))
    unknown = [k for k in given if k not in valid]
    if not unknown:
        return
    lower = {v.lower(): v for v in valid}
    parts = []
    for k in unknown:
        alias = SYNONYMS.get(k.lower())
        close = ([alias] if alias in valid else []) or difflib.get_close_matches(k, valid, n=1, cutoff=0.6) or \
            difflib.get_close_matches(k.lower(), list(lower), n=1, cutoff=0.6)
        hint = f" (did you mean {lower.get(close[0], close[0])!r}?)" if close else ""
        parts.append(f"{k!r}{hint}")
    raise UnknownParameterError(f"{owner}: unknown parameter{'s' if len(unknown) > 1 else ''} "
                                f"{', '.join(parts)}; valid parameters: {', '.join(valid)}")


def count(name: str, value, lo: int | None = None, hi: int | None = None, *, none_ok: bool = False):
    """``value`` as an int in ``[lo, hi]``: integers (numpy ones too) and integral floats are taken.

    Raises
    ------
    ValueError
        A bool, a float with a fraction, a non-number, or a value outside the range.
    """
    if value is None and none_ok:
        return None
    rng = _range_text(lo, hi)
    ok = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not ok and isinstance(value, numbers.Real) and not isinstance(value, bool):
        ok = math.isfinite(float(value)) and float(value).is_integer()
    if not ok:
        raise ValueError(f"{name} must be an integer{rng}, got {value!r}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{name} must be an integer{rng}, got {v}")
    return v


def number(name: str, value, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False, none_ok: bool = False):
    """``value`` as a finite float in the range (open ends with ``lo_open`` / ``hi_open``).

    Raises
    ------
    ValueError
        Not a real number, NaN or infinite, or outside the range.
    """
    if value is None and none_ok:
        return None
    rng = _range_text(lo, hi, lo_open, hi_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{name} must be a finite number{rng}, got {value!r}")
    v = float(value)
    if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and (v >= hi if hi_open else v > hi)):
        raise ValueError(f"{name} must be a finite number{rng}, got {v}")
    return v


def choice(name: str, value, options):
    """``value`` if it is one of ``options``, else a ValueError listing them (with the closest one)."""
    if value in options:
        return value
    close = difflib.get_close_matches(str(value), [str(o) for o in options], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"{name} must be one of {list(options)}, got {value!r}{hint}")


def _range_text(lo, hi, lo_open=False, hi_open=False) -> str:
    if lo is None and hi is None:
        return ""
    if hi is None:
        return f" {'>' if lo_open else '>='} {lo}"
    if lo is None:
        return f" {'<' if hi_open else '<='} {hi}"
    return f" in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"
