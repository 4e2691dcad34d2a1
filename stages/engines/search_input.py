"""What a search is given, checked before any query is scored: the queries and their ids, and the types of a
filter against the columns it reads.

* :func:`as_queries`: the accepted forms of ``queries`` (a string, a sequence of strings, a dict, a Series, a
  DataFrame), each text a string, and ids that stay distinct once written as the result's ``query_id``
  strings (``{1: ..., "1": ...}`` would merge two queries' hits under one id).
* :func:`check_source_id_lists`: per-query lists of source ids hold strings, the type of every source id
  (an int never equals a string id, so a list of ints would match nothing without a word).
* :func:`check_filter_types`: an expression compares a kept column with a value of its kind (numbers with
  numbers, strings with strings, ...), and Arrow's own type errors become one line naming the column.
"""
from __future__ import annotations

import itertools
import re
from collections.abc import Mapping

import numpy as np
import pandas as pd
import pyarrow as pa

__all__ = ["EXAMPLES", "as_queries", "check_filter_types", "check_source_id_lists", "expression_text", "kind_of",
           "type_error"]

EXAMPLES = 5  # repeated ids or bad entries a message names

_QUERY_FORMS = ("a string, a list of strings, a dict {query_id: text}, a pandas Series (index = query id) or a "
                "DataFrame with columns query_id and query")


def _shown(values: list) -> str:
    """Up to :data:`EXAMPLES` values for a message, with how many there are in all beyond them."""
    more = f" and {len(values) - EXAMPLES} more" if len(values) > EXAMPLES else ""
    return ", ".join(repr(v) for v in values[:EXAMPLES]) + more


def as_queries(queries) -> tuple[pa.Array, list[str]]:
    """The query ids as the result writes them (a pyarrow string array) and the query texts.

    Parameters
    ----------
    queries : str, sequence of str, dict, pandas.Series or pandas.DataFrame
        A string is one query with id ``"0"``; a sequence (list, tuple, numpy or pyarrow array, any ordered
        iterable) numbers its queries ``"0"``, ``"1"``, ...; a dict's keys, a Series' index or a DataFrame's
        ``query_id`` column are the ids (the DataFrame's texts in ``query``, else ``text``), written with
        ``str``.

    Returns
    -------
    (pyarrow.Array of string (n,), list of str (n,))

    Raises
    ------
    TypeError
        ``queries`` of another type (a number, None, bytes, a set: a set has no order to number), or a
        query text that is not a string (the message names its id).
    ValueError
        A DataFrame without ``query_id`` and ``query``; a missing id (None, NaN); ids that are equal as
        strings (``1`` and ``"1"``, a repeated ``query_id``): the message names up to five of them.
    """
    if isinstance(queries, str):
        return pa.array(["0"], pa.string()), [queries]
    given = None  # the ids as the caller wrote them, before str()
    if isinstance(queries, pd.DataFrame):
        qcol = "query" if "query" in queries.columns else "text"
        if qcol not in queries.columns or "query_id" not in queries.columns:
            raise ValueError(f"query DataFrame needs columns query_id and query; has {list(queries.columns)}")
        twice = [c for c in ("query_id", qcol) if list(queries.columns).count(c) > 1]
        if twice:
            raise ValueError(f"query DataFrame has {len(queries.columns)} columns, {twice} more than once; "
                             "it needs one query_id and one query column")
        given, texts = queries["query_id"].tolist(), queries[qcol].tolist()
    elif isinstance(queries, pd.Series):
        given, texts = queries.index.tolist(), queries.tolist()
    elif isinstance(queries, Mapping):
        given, texts = list(queries), list(queries.values())
    elif isinstance(queries, (bytes, bytearray, set, frozenset)) or not _iterable(queries):
        why = "; a set has no order to number its queries by" if isinstance(queries, (set, frozenset)) else ""
        raise TypeError(f"queries must be {_QUERY_FORMS}; got {type(queries).__name__} "
                        f"{_short(queries)}{why}")
    elif isinstance(queries, (pa.Array, pa.ChunkedArray)):
        texts = queries.to_pylist()
    else:
        texts = list(queries)
    ids = None if given is None else _query_ids(given)
    if not all(issubclass(t, str) for t in set(map(type, texts))):  # the types once each, not every text
        i = next(i for i, t in enumerate(texts) if not isinstance(t, str))
        qid = str(i) if ids is None else ids[i].as_py()
        raise TypeError(f"query {qid!r} is {texts[i]!r} ({type(texts[i]).__name__}), not a string")
    if ids is None:
        return pa.array(np.arange(len(texts), dtype=np.int64)).cast(pa.string()), texts
    return ids, texts


def _iterable(x) -> bool:
    try:
        iter(x)
    except TypeError:
        return False
    return True


def _short(x) -> str:
    text = repr(x)
    return text if len(text) <= 60 else text[:57] + "..."


def _query_ids(given: list) -> pa.Array:
    """The ids as strings, refused where one is missing or where two are equal once written as strings."""
    try:  # strings convert in Arrow's C++ loop (None becomes a null); other ids are written with str()
        ids = pa.array(given, pa.string())
        missing = np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False)) if ids.null_count else []
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        objs = pd.Series(given, dtype=object)
        missing = np.flatnonzero(objs.isna().to_numpy())  # None, NaN, pd.NA, NaT
        ids = None if len(missing) else pa.array(objs.astype(str), pa.string())
    if len(missing):
        raise ValueError(f"queries: {len(missing)} query id(s) missing (None or NaN), at position(s) "
                         f"{_shown([int(i) for i in missing])}; every query needs an id")
    if len(ids.unique()) != len(ids):  # a hash of the strings (1M ids: about 0.2 s)
        seen = pd.Series(ids.to_pylist())
        dup = seen[seen.duplicated(keep=False)]
        repeated, parts = pd.unique(dup), []
        for qid in repeated[:EXAMPLES]:  # a scan each: the ones the message names only
            spelled = [given[i] for i in dup.index[dup == qid]]
            if len({repr(s) for s in spelled}) > 1:  # the caller wrote them differently
                parts.append(f"{qid!r} (from {', '.join(repr(s) for s in spelled)})")
            else:
                parts.append(f"{qid!r} ({len(spelled)} times)")
        more = f" and {len(repeated) - EXAMPLES} more" if len(repeated) > EXAMPLES else ""
        raise ValueError(f"queries: {len(repeated)} query id(s) repeat once written as the result's query_id "
                         f"strings: {', '.join(parts)}{more}; each query needs its own id (their hits would merge "
                         "under one)")
    return ids


def check_source_id_lists(lists: list) -> None:
    """Refuse per-query lists of source ids that hold anything but strings (a source id is a string, the id
    the corpus gave; an int or None never equals one, so it would match no document without a word).

    Raises
    ------
    ValueError
        Naming the query, the entry and its type.
    """
    if all(issubclass(t, str) for t in set(map(type, itertools.chain.from_iterable(lists)))):
        return
    bad = [(q, x) for q, lst in enumerate(lists) for x in lst if not isinstance(x, str)]
    q, x = bad[0]
    shown = ", ".join(f"{v!r} ({type(v).__name__}, query {i})" for i, v in bad[:EXAMPLES])
    more = f" and {len(bad) - EXAMPLES} more" if len(bad) > EXAMPLES else ""
    hint = f"; write {str(x)!r}" if isinstance(x, (int, np.integer)) and not isinstance(x, bool) else ""
    raise ValueError(f"filter: the source ids of the index are strings (str), and the lists of allowed ids hold "
                     f"{len(bad)} entr{'y' if len(bad) == 1 else 'ies'} of another type: {shown}{more}; an id "
                     f"is compared as written, so give each as the string the corpus holds{hint}")


# -- expressions

_NUMBER = "number"


def kind_of(t: pa.DataType) -> str:
    """The kind of values an Arrow type holds, for type checks of filters: two values can be compared when
    their kinds are equal (``"number"``: every integer, float and decimal; ``"string"``, ``"binary"``,
    ``"bool"``, ``"date or timestamp"``, ``"time"``, ``"duration"``; ``"null"`` compares with any, and
    ``"string"`` with ``"binary"``, whose bytes Arrow reads as UTF-8), else the type's own name (lists,
    structs)."""
    if pa.types.is_dictionary(t):
        return kind_of(t.value_type)
    if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
        return _NUMBER
    if pa.types.is_string(t) or pa.types.is_large_string(t) or str(t) == "string_view":
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t) \
            or str(t) == "binary_view":
        return "binary"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_date(t) or pa.types.is_timestamp(t):
        return "date or timestamp"
    if pa.types.is_time(t):
        return "time"
    if pa.types.is_duration(t):
        return "duration"
    if pa.types.is_null(t):
        return "null"
    return str(t)


def _kind_text(text: str) -> str:
    """:func:`kind_of` of a type as a message spells it (``int64``, ``large_string``, ``timestamp[ns, tz=UTC]``)."""
    text = text.strip()
    try:
        return kind_of(pa.type_for_alias(text))
    except (ValueError, KeyError):
        pass
    values = re.match(r"dictionary<values=([^,]+),", text)
    if values:
        return _kind_text(values.group(1))
    for prefix, kind in (("decimal", _NUMBER), ("timestamp", "date or timestamp"), ("date", "date or timestamp"),
                         ("time", "time"), ("duration", "duration")):
        if text.startswith(prefix):
            return kind
    return text


def _split_types(text: str) -> list:
    """``"int64, timestamp[ns, tz=UTC]"`` -> the two types (commas inside brackets kept)."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += (ch in "[(<") - (ch in "])>")
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return out + [cur.strip()] if cur.strip() else out


def _fields_in(expr_text: str, schema: pa.Schema) -> list:
    """Columns of ``schema`` that an expression's text names (as a field, not inside a quoted literal)."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr_text)  # literals blanked: a value that spells a column name
    return [n for n in schema.names
            if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", bare) or f"FieldRef.Name({n})" in bare]


def expression_text(filter) -> str:
    """An expression on one line (a set lookup prints its values one a line)."""
    return " ".join(str(filter).split())


def _described(type_text: str) -> str:
    kind = _kind_text(type_text)
    return type_text if kind == type_text else f"{type_text} ({kind})"


def _mismatch(filter, schema: pa.Schema, names: list, value: str) -> ValueError:
    which = " or ".join(repr(n) for n in names[:EXAMPLES])
    col = _described(str(schema.field(names[0]).type))
    val = _described(value)
    return ValueError(f"filter {expression_text(filter)}: column {which} is {col} and the value is {val}: "
                      "they cannot match; compare a column with a value of its kind (numbers with numbers, strings "
                      "with strings)")


def check_filter_types(filter, schema: pa.Schema) -> None:
    """Refuse a set lookup (``pc.field(c).isin(values)``) whose values are of another kind than the column
    (:func:`kind_of`): Arrow would cast them (``"2000"`` to 2000, True to 1) where ``==`` refuses the same pair;
    and a comparison with a null or NaN literal (``pc.field("year") == None``), which no value satisfies (null
    for every document, as in SQL; NaN equals nothing, as in IEEE 754): ``is_null()`` / ``is_nan()`` test them.

    Raises
    ------
    ValueError
        Naming the column, its type and the values' type; or the comparison and the test to use.
    """
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expression_text(filter))  # string literals blanked
    op = r"(?:==|!=|<=|>=|<|>)"
    lit_re = r"(null\[[^\]]*\]|-?nan)"
    for lit in re.findall(rf"{op} {lit_re}\)", text) + re.findall(rf"\({lit_re} {op} ", text):
        if lit.endswith("nan") and "nan" in schema.names:  # a column named nan, not the float
            continue
        test = "is_null() or .is_valid()" if lit.startswith("null") else "is_nan()"
        raise ValueError(f"filter {expression_text(filter)}: a comparison with {lit.split('[')[0]} is "
                         f"{'null' if lit.startswith('null') else 'false (or, for !=, true)'} for every document, "
                         f"so it cannot select by value; test for it with pc.field(...).{test}")
    for name, vtype in re.findall(r"is_in\((?:FieldRef\.Name\()?([^,(){}]+?)\)?, \{value_set=([^:]+):", str(filter)):
        if name in schema.names:
            ck, vk = kind_of(schema.field(name).type), _kind_text(vtype)
            if ck != vk and "null" not in (ck, vk) and {ck, vk} != {"string", "binary"}:  # as == compares them
                raise _mismatch(filter, schema, [name], vtype)


def type_error(filter, schema: pa.Schema, exc: Exception) -> ValueError:
    """Arrow's error of an expression whose types it cannot compare (no kernel for the pair, a value set of
    another type) as one line naming the column(s), their types and the value's."""
    msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    kernel = re.search(r"no kernel matching input types \((.*)\)", msg)
    values = re.search(r"type of values set: (\S+) vs (\S+)", msg)
    pair = _split_types(kernel.group(1)) if kernel else list(values.groups()) if values else []
    cols = [n for n in _fields_in(str(filter), schema) if str(schema.field(n).type) in pair]
    if len(pair) == 2 and cols:
        of = {t: [n for n in cols if str(schema.field(n).type) == t] for t in pair}
        if pair[0] != pair[1] and of[pair[0]] and of[pair[1]]:  # two columns compared with each other
            shown = " and ".join(f"{of[t][0]!r} ({t})" for t in pair)
            return ValueError(f"filter {expression_text(filter)}: columns {shown} cannot be compared ({msg})")
        col = pair[0] if of[pair[0]] else pair[1]
        return _mismatch(filter, schema, of[col], pair[1] if col == pair[0] else pair[0])
    return ValueError(f"filter {expression_text(filter)}: its types do not fit ({msg}); compare a column with a "
                      "value of its kind (numbers with numbers, strings with strings)")
