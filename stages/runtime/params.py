"""Parameter checks shared by the pipelines and stages: a parameter is used or refused, never ignored.

Every check raises an error that names the parameter, the value and the accepted range:

>>> count("K", 2.7, lo=2)
Traceback (most recent call last):
...
ValueError: K must be an integer >= 2, got 2.7

Float parameters named in :data:`FLOAT_LIMITS` also get the bounds of that table (where the arithmetic
of the formulas that use them stays finite and meaningful), whatever range the caller passes:

>>> number("k1", 1e308, lo=0)
Traceback (most recent call last):
...
ValueError: k1 must be <= 1000, got 1e+308: ...

Sizes that a parameter implies are checked against the memory available before anything is
allocated (:func:`check_memory`, raising :class:`ResourceLimitError`).
"""
from __future__ import annotations

import contextlib
import contextvars
import difflib
import inspect
import math
import numbers
import os

__all__ = ["FLOAT_LIMITS", "ResourceLimitError", "UnknownParameterError", "available_memory", "check_keywords",
           "check_memory", "choice", "cli_syntax", "count", "flag", "format_bytes", "integer", "keywords_of", "number",
           "param"]

# Bounds of the float parameters, by name: (lowest, highest, reason).  number() applies them on top of the
# caller's range, so the stages and the loaders that check through it share them.
FLOAT_LIMITS = {
    "k1": (None, 1e3, "tuning grids stay below 3, past 1e3 tf/(k1 + tf) is linear (no saturation left) and "
                      "the float32 weights only shrink toward 0 (1e308 makes every weight 0)"),
    "delta": (None, 1e3, "the tf part of the weight is at most k1 + 1; a larger constant swamps it in the "
                         "float32 weights (1e308 overflows them to inf)"),
    "alpha": (1e-10, 1e6, "one count must still move the float32 sampling tables (count + alpha) / "
                          "(n_k + V beta), i.e. 1/alpha above float32's 6e-8 step, and alpha / (n_tokens + "
                          "V beta) must stay a float32 normal (> 1.2e-38) up to 1e10 tokens"),
    "beta": (1e-10, 1e6, "one count must still move the float32 word-topic tables (count + beta) / "
                         "(n_k + V beta), i.e. 1/beta above float32's 6e-8 step (1e308 makes V beta infinite "
                         "and the LLPT -inf), and beta / (n_tokens + V beta) must stay a float32 normal "
                         "(> 1.2e-38) up to 1e10 tokens"),
}


# names other libraries of the field use for our parameters (gensim, tomotopy, sklearn, bm25s, KenLM)
SYNONYMS = {"n_topics": "K", "num_topics": "K", "topics": "K", "k": "K", "n_components": "K",
            "n_iter": "iterations", "iter": "iterations", "iters": "iterations", "max_iter": "iterations",
            "passes": "iterations", "eta": "beta", "num_workers": "n_workers", "workers": "n_workers",
            "method": "variant", "arpa": "model", "lm": "model", "output": "out", "out_dir": "out",
            "column": "text_column", "text_col": "text_column", "id_col": "id_column", "stem": "stemmer",
            "stopword": "stopwords", "stop_words": "stopwords", "lower": "lowercase", "device": "backend"}


# How messages spell a parameter.  None while Python code calls us (``text_column=``); while a subcommand of
# the command line runs, its function ``spell(name, *value)`` -> the option (``--text-column``), or None for
# a name the subcommand has no option for.  dask's threaded scheduler copies it into its tasks.
_CLI_SPELLING: contextvars.ContextVar = contextvars.ContextVar("cutext_cli_spelling", default=None)


@contextlib.contextmanager
def cli_syntax(spell):
    """Inside the block, :func:`param` (and the range checks' messages) spell parameters as ``spell`` does.

    Parameters
    ----------
    spell : callable
        ``spell(name)`` -> the option that sets ``name`` (``"--text-column"``), ``spell(name, value)`` -> the
        option with that value as a command line writes it (``"--glob off"``); None where the running
        command has no option for ``name`` (the message then keeps the Python spelling).
    """
    token = _CLI_SPELLING.set(spell)
    try:
        yield
    finally:
        _CLI_SPELLING.reset(token)


def param(name: str, *value, bare: bool = False) -> str:
    """A parameter, and optionally a value of it, as the caller writes it, for messages.

    From Python: ``param("text_column")`` is ``"text_column="`` and ``param("glob", False)`` is
    ``"glob=False"``; while the command line runs (:func:`cli_syntax`): ``"--text-column"`` and
    ``"--glob off"``.  ``bare=True`` gives the name alone in Python, for a message whose subject it is
    (``"K must be an integer"``; ``"-K must be an integer"`` on the command line).

    >>> param("text_column"), param("K", 5), param("K", bare=True)
    ('text_column=', 'K=5', 'K')
    """
    spell = _CLI_SPELLING.get()
    said = spell(name, *value) if spell is not None else None
    if said is not None:
        return said
    if value:
        return f"{name}={value[0]!r}"
    return name if bare else f"{name}="


class UnknownParameterError(TypeError):
    """A keyword that the pipeline (or function) does not take; the message suggests the closest valid one."""


class ResourceLimitError(MemoryError, ValueError):
    """A parameter (or a saved model's field) implies arrays larger than the memory available; raised before
    any of them is allocated.  A ``MemoryError`` and a ``ValueError`` (a parameter out of range)."""


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
        raise ValueError(f"{param(name, bare=True)} must be an integer{rng}, got {value!r}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{param(name, bare=True)} must be an integer{rng}, got {v}")
    return v


def integer(name: str, value, lo: int | None = None, hi: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]``, taking integers only: Python and numpy ints, not a bool nor a float.

    The rule of counts that set how long a run goes on (iterations), where a float such as ``1e9`` is a slip
    rather than a count:

    >>> integer("iterations", 1e9, lo=1, hi=100000)
    Traceback (most recent call last):
    ...
    ValueError: iterations must be an integer in [1, 100000], got 1000000000.0 (a float)

    Raises
    ------
    ValueError
        A bool, a float (even an integral one), a non-number, or a value outside the range; the message
        names the parameter, the value and the range.
    """
    rng = _range_text(lo, hi)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        what = f" (a {type(value).__name__})" if isinstance(value, (bool, numbers.Real)) else ""
        raise ValueError(f"{param(name, bare=True)} must be an integer{rng}, got {value!r}{what}")
    v = int(value)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{param(name, bare=True)} must be an integer{rng}, got {v}")
    return v


def number(name: str, value, lo: float | None = None, hi: float | None = None, *, lo_open: bool = False,
           hi_open: bool = False, none_ok: bool = False):
    """``value`` as a finite float in the range (open ends with ``lo_open`` / ``hi_open``), and within
    ``FLOAT_LIMITS[name]`` when ``name`` is in that table.

    Raises
    ------
    ValueError
        Not a real number, NaN or infinite, outside the range, or outside the bounds of
        :data:`FLOAT_LIMITS` (the message gives the bound and its reason).
    """
    if value is None and none_ok:
        return None
    rng = _range_text(lo, hi, lo_open, hi_open)
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
        raise ValueError(f"{param(name, bare=True)} must be a finite number{rng}, got {value!r}")
    v = float(value)
    if (lo is not None and (v <= lo if lo_open else v < lo)) or (hi is not None and (v >= hi if hi_open else v > hi)):
        raise ValueError(f"{param(name, bare=True)} must be a finite number{rng}, got {v}")
    low, high, why = FLOAT_LIMITS.get(name, (None, None, ""))
    if high is not None and v > high:
        raise ValueError(f"{param(name, bare=True)} must be <= {high:g}, got {v:g}: {why}")
    if low is not None and v < low:
        raise ValueError(f"{param(name, bare=True)} must be >= {low:g}, got {v:g}: {why}")
    return v


def flag(name: str, value) -> bool:
    """``value`` if it is a bool (numpy's too): a switch is True or False, not any truthy object.

    >>> flag("lowercase", "no")
    Traceback (most recent call last):
    ...
    ValueError: lowercase must be True or False, got 'no'

    Raises
    ------
    ValueError
        Any other value (``"no"``, ``0``, None); the message names the parameter.
    """
    import numpy  # numpy's bool too (a mask element, a frame cell)

    if isinstance(value, (bool, numpy.bool_)):
        return bool(value)
    raise ValueError(f"{param(name, bare=True)} must be True or False, got {value!r}")


def choice(name: str, value, options):
    """``value`` if it is one of ``options``, else a ValueError listing them (with the closest one)."""
    if value in options:
        return value
    close = difflib.get_close_matches(str(value), [str(o) for o in options], n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    raise ValueError(f"{param(name, bare=True)} must be one of {list(options)}, got {value!r}{hint}")


def _range_text(lo, hi, lo_open=False, hi_open=False) -> str:
    if lo is None and hi is None:
        return ""
    if hi is None:
        return f" {'>' if lo_open else '>='} {lo}"
    if lo is None:
        return f" {'<' if hi_open else '<='} {hi}"
    return f" in {'(' if lo_open else '['}{lo}, {hi}{')' if hi_open else ']'}"


def format_bytes(n: int) -> str:
    """``n`` bytes for a message: ``"1.5 GiB"``."""
    x = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(x) < 1024 or unit == "PiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.1f} {unit}"
        x /= 1024
    return f"{x:.1f} EiB"  # pragma: no cover


def available_memory(gpu: bool = False) -> int:
    """Bytes that can be allocated now: free memory of the current CUDA device (``gpu``), else the host's
    available memory (psutil, a dependency of distributed; ``os.sysconf`` where it is missing)."""
    if gpu:
        import cupy

        return int(cupy.cuda.runtime.memGetInfo()[0])
    try:
        import psutil

        return int(psutil.virtual_memory().available)
    except ImportError:  # pragma: no cover - distributed brings psutil
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))


def check_memory(nbytes: int, what: str, *, gpu: bool = False, available: int | None = None) -> int:
    """Refuse an allocation of ``nbytes`` that the memory available cannot hold; call it before allocating.

    Parameters
    ----------
    nbytes : int
        Bytes the arrays would take (a Python int: no overflow for any parameter).
    what : str
        What needs them and which parameter sizes them, for the message
        (``"lda: K=10000000 and V=4258 words"``).
    gpu : bool
        Compare with the current CUDA device's free memory instead of the host's.
    available : int, optional
        Bytes available (default :func:`available_memory`).

    Returns
    -------
    int
        ``nbytes``.

    Raises
    ------
    ResourceLimitError (MemoryError, ValueError)
        ``nbytes`` exceeds the memory available; the message gives both sizes.
    """
    nbytes = int(nbytes)
    avail = available_memory(gpu) if available is None else int(available)
    if nbytes > avail:
        raise ResourceLimitError(f"{what}: would need {format_bytes(nbytes)} ({nbytes:,} bytes) but "
                                 f"{format_bytes(avail)} of {'device' if gpu else 'host'} memory is available")
    return nbytes
