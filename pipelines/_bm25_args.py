"""The ``bm25`` build's arguments: ``keep_columns=``, BM25F's ``field_weights=`` / ``field_b=``, the tokenizer's
keywords, and an append's settings checked against the index's own."""

from __future__ import annotations

from pathlib import Path

from cutext.stages.engines.bm25_index import bm25f_spec
from cutext.stages.engines.index_commits import segmented_commit
from cutext.stages.runtime.params import param
from cutext.stages.text import bm25 as bm25_stage
from cutext.stages.text.tokenize import TokenizerConfig

_BUILD_DEFAULTS = {"variant": "lucene", "k1": 1.2, "b": 0.75, "delta": None, "index_format": 2, "overwrite": True,
                   "store_text": False, "keep_columns": None, "positions": False, "norms": "exact"}
_TOKENIZER_DEFAULTS = (True, None, None, 1, None, None)


def _keep_columns_arg(keep_columns) -> list | None:
    """``keep_columns=`` as a list of distinct names (a str alone is one), None for none.

    Raises
    ------
    ValueError
        Not a str or a list of distinct non-empty str.
    """
    if keep_columns is None:
        return None
    cols = [keep_columns] if isinstance(keep_columns, str) else keep_columns
    if (not isinstance(cols, (list, tuple)) or not all(isinstance(c, str) and c for c in cols)
            or len(set(cols)) != len(cols)):
        raise ValueError(f"{param('keep_columns', bare=True)} must be a column name or a list of distinct column "
                         f"names, got {keep_columns!r}")
    return list(cols) or None


def _check_append_settings(out, *, tokenizer, fields=None, text_column=None, **given) -> None:
    """``build_index(append=True)`` takes the index's own settings: one given here that is not the default and
    differs from the index's is refused (it would be ignored otherwise); so are BM25F ``fields`` (``(names,
    weights, bs)``) or text columns other than a BM25F index's, and BM25F settings for a one-field index."""
    old, _ = segmented_commit(Path(out), "appending")
    have_fields = bm25f_spec(old, Path(out) / "index.json")
    if fields is not None and have_fields is None:
        raise ValueError(f"{param('append', True)}: the index {out} joins its text columns into one field; "
                         f"{param('field_weights', bare=True)} and {param('field_b', bare=True)} apply to an index "
                         "built with them (BM25F): leave them out, or build a new index")
    if fields is not None and fields != have_fields:
        raise ValueError(f"{param('append', True)}: the index {out} scores the fields {list(have_fields[0])} with "
                         f"weights {list(have_fields[1])} and b {list(have_fields[2])}; the fields given here are "
                         f"{list(fields[0])} with weights {list(fields[1])} and b {list(fields[2])}: leave "
                         f"{param('field_weights', bare=True)} and {param('field_b', bare=True)} out")
    cols = [text_column] if isinstance(text_column, str) else text_column
    if have_fields is not None and cols is not None and list(cols) != list(have_fields[0]):
        raise ValueError(f"{param('append', True)}: the index {out} scores the text columns {list(have_fields[0])} "
                         f"as BM25F fields; {param('text_column', bare=True)}={text_column!r} differs (leave it out "
                         "to read the index's columns)")
    bad = [k for k, v in given.items() if v != _BUILD_DEFAULTS[k] and v != old.get(k, _BUILD_DEFAULTS[k])]
    if "overwrite" in bad or "index_format" in bad:
        bad = [k for k in bad if k in ("overwrite", "index_format")]
        raise ValueError(f"{param('append', True)} adds segments to {out}: "
                         f"{', '.join(param(k, bare=True) for k in bad)} do not apply (an append writes a "
                         "new commit of the segmented index)")
    have = dict(old, **TokenizerConfig.from_dict(old["tokenizer"]).to_dict())
    names = ("lowercase", "stopwords", "stemmer", "min_len", "max_len", "analyzer")
    for name, v, d in zip(names, tokenizer, _TOKENIZER_DEFAULTS):
        if v != d and TokenizerConfig.make(**{name: v}).to_dict().get(name) != have.get(name):
            bad.append(name)
    if bad:
        raise ValueError(f"{param('append', True)} uses the settings of the index {out}; "
                         f"{', '.join(param(k, bare=True) for k in bad)} differ from them "
                         f"(the index has {', '.join(f'{k}={have.get(k)!r}' for k in bad)}): leave them out")


def _tokenizer_kw(tok_cfg: TokenizerConfig) -> dict:
    """The keywords of :func:`build_index` that make ``tok_cfg``."""
    d = tok_cfg.to_dict()
    return {k: d[k] for k in ("lowercase", "stopwords", "stemmer", "min_len", "max_len")}


def _field_spec(text_column, field_weights, field_b, b) -> tuple | None:
    """BM25F's ``(fields, weights, bs)`` (tuples in the order of ``text_column``; a field left out of
    ``field_weights`` weighs 1, one left out of ``field_b`` takes ``b``), or None when neither is given (a
    list ``text_column`` is then joined into one text).

    Raises
    ------
    ValueError
        ``field_weights`` / ``field_b`` that are not dicts, no ``text_column``, a repeated column, a key that
        is not a text column (named, with the columns), a weight < 0 or all 0, a b outside [0, 1].
    """
    if field_weights is None and field_b is None:
        return None
    for name, given in (("field_weights", field_weights), ("field_b", field_b)):
        if given is not None and not isinstance(given, dict):
            raise ValueError(f"{param(name, bare=True)} must be a dict {{text column: number}}, got {given!r}")
    if text_column is None:
        raise ValueError(f"{param('field_weights', bare=True)} / {param('field_b', bare=True)} score the columns of "
                         f"{param('text_column', bare=True)} as BM25F fields: name them "
                         f"({param('text_column', ['title', 'body'])})")
    cols = [text_column] if isinstance(text_column, str) else list(text_column)
    if not cols or not all(isinstance(c, str) for c in cols) or len(set(cols)) != len(cols):
        raise ValueError(f"BM25F fields: {param('text_column', bare=True)} must be distinct column names, got "
                         f"{text_column!r}")
    for name, given in (("field_weights", field_weights), ("field_b", field_b)):
        unknown = [k for k in (given or {}) if k not in cols]
        if unknown:
            raise ValueError(f"{param(name, bare=True)} names {', '.join(map(repr, unknown))}, which is not a text "
                             f"column; the text columns ({param('text_column', bare=True)}) are {cols}")
    ws, bs = bm25_stage.check_field_params(cols, [(field_weights or {}).get(c, 1.0) for c in cols],
                                           [(field_b or {}).get(c, b) for c in cols])
    return tuple(cols), ws, bs
