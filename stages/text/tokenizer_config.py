"""The tokenizer's settings and term rules: stopword lists, stemmers, :class:`TokenizerConfig`, and the
mapping of raw tokens to terms (length filter, stopwords, stemming; :func:`map_terms`).

:mod:`cutext.stages.text.tokenize` describes the rules and applies them (its split gives the raw tokens).
"""
from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cutext.stages.runtime.params import count, flag, param
from cutext.stages.text.anserini import ANALYZERS
from cutext.stages.text.porter import porter_stem_array, porter_stems

# Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (the stop set Anserini's default analyzer uses).
LUCENE_STOPWORDS = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then "
    "there these they this to was will with".split())



def read_snowball_list(path, keep=frozenset()) -> frozenset:
    """The words of a stop list in Snowball's format (a word at the start of a line, ``|`` starts a
    comment), split as the tokenizer splits text: the apostrophe separates tokens, so ``don't`` stops
    the tokens ``don`` and ``t``.

    Parameters
    ----------
    path : str or os.PathLike
    keep : frozenset of str
        Pieces of split entries that are not stopwords themselves (they are kept in the text).

    Returns
    -------
    frozenset of str
    """
    words = set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        head = line.split("|", 1)[0].split()
        if head:
            # the list is ASCII, where \w+ are exactly the tokenizer's runs of word characters
            pieces = re.findall(r"\w+", head[0].lower())
            words.update(pieces if len(pieces) == 1 else [p for p in pieces if p not in keep])
    return frozenset(words)


# Snowball's English stop list (BSD-3-Clause, package data beside this module; 174 entries, 146
# tokens once its contractions are split): the default of the lda pipeline on text corpora.  The list
# leaves "can" out on purpose (tin can), and "won" and "let" are words too: the heads of can't, won't
# and let's are not stopwords.
ENGLISH_STOPWORDS = read_snowball_list(Path(__file__).with_name("stopwords_english.txt"),
                                       keep=frozenset({"can", "won", "let"}))

# Closed word classes a topic never needs, beyond Snowball's list: modal verbs (not "can", which Snowball leaves
# out on purpose), number words (as digits are), general adverbs and quantifiers, and the reporting verbs and titles
# of news.  With Snowball's list, the lda pipeline's default for text ("english-topics"; docs/decisions.md).
TOPIC_EXTRA_STOPWORDS = frozenset(
    "will shall may might must "
    "one two three four five six seven eight nine ten first "
    "also now even still just yet already often however perhaps rather quite really almost though although thus "
    "therefore indeed ever never always much many several every another "
    "said says say told mr mrs ms".split())
ENGLISH_TOPIC_STOPWORDS = ENGLISH_STOPWORDS | TOPIC_EXTRA_STOPWORDS

STOPWORD_SETS = {"lucene": LUCENE_STOPWORDS, "english": ENGLISH_STOPWORDS, "english-topics": ENGLISH_TOPIC_STOPWORDS,
                 "none": frozenset()}


def resolve_stopwords(stopwords) -> frozenset:
    """Stopword set from a name (``"lucene"``, ``"english"``, ``"english-topics"``, ``"none"``), a file path (str or
    ``os.PathLike``, one word per line) or an iterable of words (str).

    Raises
    ------
    ValueError
        A str that is neither a known name nor an existing file.
    TypeError
        Anything else: a number, bytes, a mapping, an iterable holding a non-str (the message names
        ``stopwords`` and what it got).
    """
    if stopwords is None:
        return frozenset()
    if isinstance(stopwords, os.PathLike):
        stopwords = os.fspath(stopwords)
        if not isinstance(stopwords, str):
            raise TypeError(f"stopwords must be 'lucene', 'english', 'none', 'english-topics', a file path or a list "
                            f"of words, got the bytes path {stopwords!r}")
        if not Path(stopwords).exists():  # a directory is refused below, by name
            raise ValueError(f"stopwords: no such file {stopwords!r}")
    if isinstance(stopwords, str):
        if stopwords in STOPWORD_SETS:
            return STOPWORD_SETS[stopwords]
        p = Path(stopwords)
        if p.is_file():
            return frozenset(w.strip().lower() for w in p.read_text(encoding="utf-8").splitlines() if w.strip())
        if p.is_dir():
            raise ValueError(f"stopwords {stopwords!r}: is a directory; a stopword list is a file of one word a line")
        raise ValueError(f"unknown stopword list {stopwords!r}: use 'lucene', 'english', 'none', 'english-topics', a "
                         "file path or a list of words")
    # bytes and mappings iterate as ints / keys: neither is meant as a list of words
    if isinstance(stopwords, (bytes, bytearray, dict)) or not hasattr(stopwords, "__iter__"):
        raise TypeError(f"stopwords must be 'lucene', 'english', 'none', 'english-topics', a file path or a list of "
                        f"words, got {type(stopwords).__name__} {stopwords!r}"[:300])
    words = list(stopwords)
    bad = next((w for w in words if not isinstance(w, str)), None)
    if bad is not None:
        raise TypeError(f"stopwords must be a list of words (str), got an item of type {type(bad).__name__}: "
                        f"{bad!r}"[:300])
    return frozenset(w.lower() for w in words)


@dataclass(frozen=True)
class TokenizerConfig:
    """Tokenizer settings (recorded in every index's JSON).

    Parameters
    ----------
    lowercase : bool
    stopwords : frozenset of str
    stemmer : str or None
        A PyStemmer algorithm name (``"porter"``, ``"english"``, ``"german"`` ...) or None.
    min_len, max_len : int, int or None
        Token length bounds in code points, before stemming.
    analyzer : {None, "anserini"}
        None: the rules of this module.  ``"anserini"``: Anserini's ``DefaultEnglishAnalyzer``
        (:mod:`cutext.stages.text.anserini`: Lucene's word boundaries, possessive filter and lowercase, no
        NFC), with Lucene's stopwords and ``stemmer="lucene_porter"``; on the GPU its split is the word-break
        kernels (:mod:`cutext.kernels.wordbreak`), with the same tokens.
    """

    lowercase: bool = True
    stopwords: frozenset = field(default_factory=frozenset)
    stemmer: str | None = None
    min_len: int = 1
    max_len: int | None = None
    analyzer: str | None = None

    @classmethod
    def make(cls, lowercase=True, stopwords=None, stemmer=None, min_len=1, max_len=None, analyzer=None):
        """Build from user-facing values (stopword names/paths/lists; stemmer name or None; analyzer preset).

        Raises
        ------
        ValueError
            An unknown ``analyzer``, or ``analyzer="anserini"`` with a setting the preset fixes
            (``stopwords`` other than None or ``"lucene"``, a ``stemmer``, ``lowercase=False``, length bounds).
        """
        check_stemmer(stemmer)
        lowercase = flag("lowercase", lowercase)
        min_len = count("min_len", min_len, lo=1)
        max_len = count("max_len", max_len, lo=min_len, none_ok=True)
        if analyzer is not None:
            return cls._preset(analyzer, lowercase, stopwords, stemmer, min_len, max_len)
        return cls(bool(lowercase), resolve_stopwords(stopwords), stemmer, int(min_len),
                   None if max_len is None else int(max_len))

    @classmethod
    def _preset(cls, analyzer, lowercase, stopwords, stemmer, min_len, max_len):
        if analyzer not in ANALYZERS:
            raise ValueError(f"{param('analyzer', bare=True)} must be one of {list(ANALYZERS)} or None, got "
                             f"{analyzer!r}")
        fixed = {"lowercase": (lowercase, True), "stemmer": (stemmer, None), "min_len": (min_len, 1),
                 "max_len": (max_len, None)}
        bad = [k for k, (v, d) in fixed.items() if v != d]
        if not (stopwords is None or (isinstance(stopwords, str) and stopwords == "lucene")):
            bad.insert(1, "stopwords")
        if bad:
            names = ", ".join(param(b, bare=True) for b in bad)
            raise ValueError(f"{param('analyzer', analyzer)} is Anserini's DefaultEnglishAnalyzer (lowercase, Lucene's "
                             f"stopwords, Lucene's Porter stemmer): leave {names} out")
        return cls(True, LUCENE_STOPWORDS, LUCENE_PORTER, 1, None, analyzer)

    def to_dict(self) -> dict:
        d = {"lowercase": self.lowercase, "stopwords": sorted(self.stopwords), "stemmer": self.stemmer,
             "min_len": self.min_len, "max_len": self.max_len}
        if self.analyzer is not None:
            return {**d, "analyzer": self.analyzer, "normalization": "none",
                    "split": "Lucene StandardTokenizer (UAX #29 word boundaries), English possessive filter"}
        return {**d, "normalization": "NFC", "split": "maximal runs of Unicode letters (L*), marks (M*), numbers "
                                                      "(N*) and connector punctuation (Pc)"}

    @classmethod
    def from_dict(cls, d: dict) -> "TokenizerConfig":
        """The settings recorded by :meth:`to_dict` (an index's or model's manifest), checked field by field.

        Raises
        ------
        ValueError
            A field of the wrong type or out of range, or an unknown stemmer; the message names the field
            as ``tokenizer.<field>`` (the loaders prefix the manifest's path).
        """
        if not isinstance(d, dict):
            raise ValueError(f"tokenizer settings must be an object, got {type(d).__name__}")
        lowercase = d.get("lowercase", True)
        if not isinstance(lowercase, bool):
            raise ValueError(f"tokenizer.lowercase must be true or false, got {lowercase!r}")
        stopwords = d.get("stopwords", ())
        if not isinstance(stopwords, (list, tuple)) or not all(isinstance(w, str) for w in stopwords):
            raise ValueError(f"tokenizer.stopwords must be a list of words (str), got {stopwords!r}"[:300])
        try:
            stemmer = check_stemmer(d.get("stemmer"), "tokenizer.stemmer")
        except TypeError as exc:
            raise ValueError(str(exc)) from None
        min_len, max_len = d.get("min_len", 1), d.get("max_len")
        for name, v, lo in (("min_len", min_len, 1), ("max_len", max_len, min_len)):
            if v is None and name == "max_len":
                continue
            if isinstance(v, bool) or not isinstance(v, int) or (isinstance(lo, int) and v < lo):
                raise ValueError(f"tokenizer.{name} must be an integer >= {lo!r}"
                                 f"{' or null' if name == 'max_len' else ''}, got {v!r}")
        analyzer = d.get("analyzer")
        if analyzer is not None and analyzer not in ANALYZERS:
            raise ValueError(f"tokenizer.analyzer must be one of {list(ANALYZERS)} or null, got {analyzer!r}")
        return cls(lowercase, frozenset(stopwords), stemmer, min_len, max_len, analyzer)

    @property
    def needs_term_map(self) -> bool:
        return bool(self.stopwords) or self.stemmer is not None or self.min_len > 1 or self.max_len is not None


# Porter's stemmer as Lucene's PorterStemFilter runs it (cutext.stages.text.porter), beside PyStemmer's names
LUCENE_PORTER = "lucene_porter"


def check_stemmer(stemmer, name: str = "stemmer"):
    """``stemmer`` if it is None, ``"lucene_porter"`` (:mod:`cutext.stages.text.porter`) or a PyStemmer
    algorithm name.

    Raises
    ------
    TypeError
        Not a str (nor None).
    ValueError
        A name PyStemmer does not know; the message lists the ones it has.
    """
    if stemmer is None:
        return None
    if not isinstance(stemmer, str):
        raise TypeError(f"{name} must be a PyStemmer algorithm name (str) or None, got "
                        f"{type(stemmer).__name__} {stemmer!r}")
    if stemmer == LUCENE_PORTER:
        return stemmer
    import Stemmer

    if stemmer not in Stemmer.algorithms():
        raise ValueError(f"{name}: unknown stemmer {stemmer!r}; PyStemmer has {sorted(Stemmer.algorithms())}")
    return stemmer


_stemmers = threading.local()


def _stemmer(name):
    cache = getattr(_stemmers, "cache", None)
    if cache is None:
        cache = _stemmers.cache = {}
    if name not in cache:
        import Stemmer

        cache[name] = Stemmer.Stemmer(name)
    return cache[name]


def map_terms(terms: list[str], cfg: TokenizerConfig) -> list[str | None]:
    """Apply length filter, stopwords and stemming to unique raw tokens (None = dropped)."""
    out: list[str | None] = []
    keep_idx, keep = [], []
    lo, hi, stop = cfg.min_len, cfg.max_len, cfg.stopwords
    for i, t in enumerate(terms):
        n = len(t)
        if n < lo or (hi is not None and n > hi) or t in stop:
            out.append(None)
        else:
            out.append(t)
            keep_idx.append(i)
            keep.append(t)
    if cfg.stemmer is not None and keep:
        for i, s in zip(keep_idx, stem_words(keep, cfg.stemmer)):
            out[i] = s
    return out


def map_terms_arrow(terms: pa.Array, cfg: TokenizerConfig) -> tuple[np.ndarray, pa.Array]:
    """:func:`map_terms` over an Arrow array of distinct raw tokens, in Arrow's kernels (off the GIL) but for
    the words no partition of this process stemmed before.

    Parameters
    ----------
    terms : pyarrow.Array of large_string, shape (U,)
    cfg : TokenizerConfig

    Returns
    -------
    keep : bool array, shape (U,)
        The tokens that pass the length filter and the stop list (``map_terms`` gives them a term).
    mapped : pyarrow.Array of large_string, shape (keep.sum(),)
        Their terms (stems with a stemmer), in ``terms``' order: ``map_terms``' non-None values.
    """
    n = pc.utf8_length(terms).to_numpy(zero_copy_only=False)  # code points, as len() counts them
    keep = n >= cfg.min_len
    if cfg.max_len is not None:
        keep &= n <= cfg.max_len
    if cfg.stopwords:
        stop = pa.array(sorted(cfg.stopwords), type=pa.large_string())
        keep &= ~pc.is_in(terms, value_set=stop).to_numpy(zero_copy_only=False)
    kept = terms.filter(pa.array(keep))
    if cfg.stemmer is not None and len(kept):
        kept = stem_array(kept, cfg.stemmer)
    return keep, kept


_arrow_memo: dict[str, tuple[pa.Array, pa.Array]] = {}  # stemmer -> (words, their stems), large_string
_arrow_memo_lock = threading.Lock()


def stem_array(words: pa.Array, stemmer: str) -> pa.Array:
    """:func:`stem_words` of an Arrow array (large_string): the stems of words stemmed before in this process
    are looked up and gathered by Arrow's kernels, the others stemmed as :func:`stem_words` stems them and remembered
    (up to ``STEM_MEMO_MAX`` words a stemmer).  ``"lucene_porter"`` stems every word, in numba over the Arrow
    buffers (:func:`cutext.stages.text.porter.porter_stem_array`): that is faster than the memo's lookups."""
    if stemmer == LUCENE_PORTER:
        return porter_stem_array(words)
    known, stems = _arrow_memo.get(stemmer, (None, None))
    if known is not None:
        idx = pc.index_in(words, value_set=known)
        found = idx.is_valid().to_numpy(zero_copy_only=False)
    else:
        idx, found = None, np.zeros(len(words), bool)
    if found.all():
        return stems.take(idx)
    missing = words.filter(pa.array(~found))
    fresh = pa.array(_stem_fresh(missing.to_pylist(), stemmer), type=pa.large_string())  # this memo only
    take = np.cumsum(~found) - 1  # the i-th missing word's stem is fresh[i]
    if idx is not None:
        take = np.where(found, idx.fill_null(0).to_numpy(zero_copy_only=False), len(stems) + take)
        table = pa.concat_arrays([stems, fresh])
    else:
        table = fresh
    out = table.take(pa.array(take))
    with _arrow_memo_lock:
        known, stems = _arrow_memo.get(stemmer, (None, None))
        if known is None or len(known) + len(missing) > STEM_MEMO_MAX:
            _arrow_memo[stemmer] = (missing, fresh)
        else:
            _arrow_memo[stemmer] = (pa.concat_arrays([known, missing]), pa.concat_arrays([stems, fresh]))
    return out


# stems already made in this process, a dict a stemmer: the partitions of a corpus share most of their words,
# and PyStemmer holds the GIL, so threads building one index stemmed the same words each (20 Newsgroups: 8
# partitions of ~40 k distinct words, 150 k in all); cleared when full, a bound on its memory (tens of MB)
STEM_MEMO_MAX = 1 << 18
_stem_memo: dict[str, dict[str, str]] = {}


def stem_words(words: list[str], stemmer: str) -> list[str]:
    """The stems of ``words`` (PyStemmer's Snowball algorithm ``stemmer``), one per word.

    ``"porter"``: words of one or two characters are left as they are, as in Porter's reference C
    stemmer and Lucene's PorterStemmer (Anserini): ``if (k <= k0+1) return``; Snowball's port of
    Porter would stem ``"s"`` to ``""``.  ``"lucene_porter"``: :func:`cutext.stages.text.porter.porter_stems`.
    A word stemmed before in this process (up to ``STEM_MEMO_MAX`` a stemmer) takes its stem from memory.
    """
    memo = _stem_memo.setdefault(stemmer, {})
    out = [memo.get(w) for w in words]
    todo = [i for i, s in enumerate(out) if s is None]
    if todo:
        fresh = [words[i] for i in todo]
        stems = _stem_fresh(fresh, stemmer)
        for i, s in zip(todo, stems):
            out[i] = s
        if len(memo) + len(fresh) > STEM_MEMO_MAX:
            memo.clear()
        memo.update(zip(fresh, stems))
    return out


def _stem_fresh(words: list[str], stemmer: str) -> list[str]:
    if stemmer == LUCENE_PORTER:
        return porter_stems(words)
    st = _stemmer(stemmer)
    if stemmer != "porter":
        return st.stemWords(words)
    out = list(words)
    idx = [i for i, w in enumerate(words) if len(w) > 2]
    for i, s in zip(idx, st.stemWords([words[i] for i in idx])):
        out[i] = s
    return out
