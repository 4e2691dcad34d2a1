"""The lda pipeline's defaults and the reading of its model: stop list, K, document-frequency pruning, the
parameters' checks, main topics and printed topics (split from test_lda.py; the same real data)."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from cutext import pipelines
from cutext.pipelines.lda import LDAModel
from cutext.stages.engines.lda_chunk import (
    LDAInputError,
)

# ----------------------------------------------------------------------------- defaults: stopwords, pruning, alpha

@pytest.fixture(scope="module")
def lee_path(shared_data):
    return shared_data / "corpora" / "gensim" / "lee_background.cor"


def test_text_corpus_drops_english_stopwords_by_default(lee_path, tmp_path):
    """A text corpus with the defaults: Snowball's English list and closed classes, alpha 0.1, the "auto" pruning,
    all recorded."""
    from cutext.pipelines.lda import AUTO_MAX_DF, AUTO_MIN_DF
    from cutext.stages.text.tokenize import ENGLISH_STOPWORDS, ENGLISH_TOPIC_STOPWORDS

    r = pipelines.run("lda", str(lee_path), out=tmp_path / "m", K=5, iterations=2, format="lines", backend="cpu",
                      progress=False)
    m = LDAModel.load(r.path)
    assert not {"the", "a", "and", "s", "t", "his", "have", "after"} & set(m.vocab)  # the user's stopword topics
    assert {"government", "united", "can", "won"} <= set(m.vocab)  # content words stay
    p = json.loads((tmp_path / "m" / "params.json").read_text())
    assert p["stopwords"] == "english-topics" and p["alpha"] == 0.1
    assert (p["min_df"], p["max_df"]) == (AUTO_MIN_DF, AUTO_MAX_DF)
    assert set(p["tokenizer"]["stopwords"]) == ENGLISH_TOPIC_STOPWORDS > ENGLISH_STOPWORDS
    assert not {"will", "one", "also", "said", "mr"} & set(m.vocab)  # the filler words
    none = pipelines.run("lda", str(lee_path), out=tmp_path / "none", K=5, iterations=2, format="lines",
                         stopwords=None, min_df=1, max_df=1.0, backend="cpu", progress=False)
    assert "the" in LDAModel.load(none.path).vocab and none.params["stopwords"] == "none"
    assert r.counts["n_tokens"] < 0.6 * none.counts["n_tokens"]  # stopwords are about half of English text


def _filler_corpus(n_docs: int) -> pd.DataFrame:
    """``n_docs`` documents of six subjects (each word in a sixth of them or fewer), every one holding the
    word ``blah`` three times: the filler word of the issue's topics (``said``, ``will``)."""
    subjects = ["goal match team league striker", "bank loan interest rate credit", "gene protein cell dna enzyme",
                "court judge trial jury verdict", "rain wind storm cloud snow", "guitar drum song band album"]
    rng = np.random.default_rng(0)
    texts = []
    for d in range(n_docs):
        words = subjects[d % len(subjects)].split()
        texts.append(" ".join(["blah"] * 3 + list(rng.choice(words, 8)) + [f"once{d}"]))
    return pd.DataFrame({"id": [str(d) for d in range(n_docs)], "text": texts})


def test_defaults_prune_a_word_of_every_document_and_choose_k(tmp_path):
    """The defaults: K from the number of documents, and a word in every document (or in one only) belongs to
    no topic: it is pruned and recorded.  ``blah`` is the most frequent word: without pruning it tops every
    topic."""
    from cutext.pipelines.lda import AUTO_MAX_DF, AUTO_MIN_DF, AUTO_PRUNE_MIN_DOCS, auto_topics

    docs = _filler_corpus(AUTO_PRUNE_MIN_DOCS + 10)
    r = pipelines.run("lda", docs, out=tmp_path / "m", iterations=5, text_column="text", id_column="id",
                      backend="cpu", progress=False)
    m = LDAModel.load(r.path)
    top = set(m.top_words(5)["term"])
    assert "blah" not in top and "blah" not in set(m.vocab) and not any(w.startswith("once") for w in m.vocab)
    assert {"goal", "bank", "gene", "court", "rain", "song"} & top
    p = json.loads((tmp_path / "m" / "params.json").read_text())
    assert (p["min_df"], p["max_df"]) == (AUTO_MIN_DF, AUTO_MAX_DF) and p["K"] == auto_topics(len(docs))
    assert p["pruning"]["most_frequent_removed"][0] == "blah"
    kept = pipelines.run("lda", docs, out=tmp_path / "all", K=3, iterations=5, min_df=1, max_df=1.0,
                         text_column="text", id_column="id", backend="cpu", progress=False)
    assert "blah" in set(LDAModel.load(kept.path).top_words(1)["term"])  # what the pruning spares the user


def test_auto_pruning_spares_small_corpora_and_counted_input(reuters_path, tmp_path):
    """Below AUTO_PRUNE_MIN_DOCS documents, and for an LDA-C / UCI vocabulary, "auto" prunes nothing."""
    from cutext.pipelines.lda import AUTO_PRUNE_MIN_DOCS, auto_topics

    docs = _filler_corpus(AUTO_PRUNE_MIN_DOCS - 1)
    r = pipelines.run("lda", docs, out=tmp_path / "small", iterations=1, text_column="text", id_column="id",
                      backend="cpu", progress=False)
    assert (r.params["min_df"], r.params["max_df"]) == (1, 1.0) and "blah" in set(LDAModel.load(r.path).vocab)
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "ldac", iterations=1, backend="cpu", progress=False)
    assert (r.params["min_df"], r.params["max_df"]) == (1, 1.0) and r.counts["n_tokens"] == 84010
    assert r.params["K"] == auto_topics(395)
    assert [auto_topics(n) for n in (0, 220, 221, 2225, 19800, 19801, 10**7)] == [10, 10, 11, 33, 99, 100, 100]


@pytest.mark.parametrize("K,match", [("20", r"K='20': give an integer >= 2 or \"auto\""),
                                     (1, r"K must be an integer")])
def test_k_is_an_integer_or_auto(reuters_path, tmp_path, K, match):
    """K is refused before any work: a string other than "auto" (a CLI slip such as a quoted number) or K < 2."""
    with pytest.raises(ValueError, match=match):
        pipelines.run("lda", str(reuters_path), out=tmp_path / "m", K=K, progress=False)
    assert not (tmp_path / "m").exists()


def _document_frequency(bow):
    df = np.zeros(len(bow.vocab), np.int64)
    for d in range(bow.n_docs):
        df[np.unique(bow.word[bow.doc_ptr[d]:bow.doc_ptr[d + 1]])] += 1
    return df


@pytest.mark.parametrize("min_df,max_df,lo,hi", [(5, 0.5, 5, 197.5), (0.01, 100, 3.95, 100), (2, 1.0, 2, 395)])
def test_min_df_max_df_prune_as_documented(reuters, reuters_path, tmp_path, min_df, max_df, lo, hi):
    """Kept: the words in lo <= df <= hi documents (an int counts documents, a float is a fraction of 395)."""
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "m", K=4, iterations=1, min_df=min_df, max_df=max_df,
                      backend="cpu", progress=False)
    df = _document_frequency(reuters)
    freq = np.bincount(reuters.word, weights=reuters.count, minlength=len(reuters.vocab))
    keep = (df >= lo) & (df <= hi)
    assert set(LDAModel.load(r.path).vocab) == {w for w, k in zip(reuters.vocab, keep) if k}
    assert r.counts["n_tokens"] == int(freq[keep].sum())
    p = json.loads((tmp_path / "m" / "params.json").read_text())["pruning"]
    assert (p["min_df"], p["max_df"], p["min_docs"], p["max_docs"]) == (min_df, max_df, lo, hi)
    assert p["words_removed"] == int((~keep & (df > 0)).sum()) and p["tokens_removed"] == int(freq[~keep].sum())
    removed = np.flatnonzero(~keep & (df > 0))
    assert p["most_frequent_removed"][:1] == [reuters.vocab[removed[np.argmax(freq[removed])]]] if len(removed) \
        else p["most_frequent_removed"] == []


def test_vocabulary_input_keeps_its_words_unless_a_list_is_given(reuters, reuters_path, tmp_path):
    """LDA-C input is already a vocabulary: no stopword list by default; a list given drops its words from it."""
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "auto", K=4, iterations=1, backend="cpu",
                      progress=False)
    assert r.counts["n_tokens"] == 84010 and r.params["stopwords"] == "none"
    assert "against" in LDAModel.load(r.path).vocab  # a Snowball stopword of this vocabulary
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "en", K=4, iterations=1, stopwords="english",
                      backend="cpu", progress=False)
    vocab = set(LDAModel.load(r.path).vocab)
    assert "against" not in vocab and "church" in vocab and r.params["stopwords"] == "english"
    p = json.loads((tmp_path / "en" / "params.json").read_text())["pruning"]
    assert p["stopwords_removed"] == p["words_removed"] > 0 and p["tokens_removed"] == 84010 - r.counts["n_tokens"]


@pytest.mark.parametrize("kw,match", [
    ({"min_df": 0}, r"min_df=0: an int is a number of documents, >= 1"),
    ({"min_df": 2.0}, r"min_df=2\.0: .*a fraction of the documents, in \[0, 1\]\); for 2 documents give the int 2"),
    ({"max_df": 1.5}, r"max_df=1\.5: give an int .* or a float"),
    ({"max_df": 0.0}, r"max_df=0\.0 keeps no word"),
    ({"min_df": True}, r"min_df=True"),
    ({"max_df": "50%"}, r"max_df='50%'"),
    ({"min_df": float("nan")}, r"min_df=nan"),
])
def test_bad_pruning_values_are_refused_before_any_work(reuters_path, tmp_path, kw, match):
    out = tmp_path / "m"
    with pytest.raises(ValueError, match=match):
        pipelines.run("lda", str(reuters_path), out=out, K=4, iterations=1, backend="cpu", progress=False, **kw)
    assert not out.exists()


def test_pruning_that_leaves_no_word_names_the_bounds(reuters_path, tmp_path):
    with pytest.raises(ValueError, match=r"min_df=300 keeps the words in at least 300 documents and max_df=0\.5 "
                                         r"those in at most 197\.5 of the 395"):
        pipelines.run("lda", str(reuters_path), out=tmp_path / "a", K=4, min_df=300, max_df=0.5, progress=False)
    with pytest.raises(LDAInputError, match=r"pruning leaves 0 word\(s\) of 4,258 \(min_df=395: .*most frequent "
                                            r"removed: \['church', .*lower min_df"):
        pipelines.run("lda", str(reuters_path), out=tmp_path / "b", K=4, min_df=395, progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_transform_takes_one_str_and_names_bad_documents(reuters_path, tmp_path):
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "m", K=4, iterations=3, backend="cpu", progress=False)
    m = LDAModel.load(r.path)
    one = m.transform("pope church vatican", iterations=3, backend="cpu")
    assert one.shape == (1, 4)
    np.testing.assert_array_equal(one, m.transform([["pope", "church", "vatican"]], iterations=3, backend="cpu"))
    with pytest.raises(TypeError, match="docs is bytes: decode it"):
        m.transform(b"pope church", backend="cpu")
    with pytest.raises(TypeError, match=r"docs\[1\] must be a str \(a text\), as docs\[0\], got list"):
        m.transform(["pope church", ["pope"]], backend="cpu")
    with pytest.raises(TypeError, match=r"docs\[0\] must be a list of str \(tokens\), got list \['pope', 3\]"):
        m.transform([["pope", 3]], backend="cpu")
    with pytest.raises(TypeError, match="docs must be a str .* got int 5"):
        m.transform(5, backend="cpu")


@pytest.mark.parametrize("alpha", [None, 0.1])
def test_alpha_default_is_0_1(reuters_path, tmp_path, alpha):
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "m", K=50, iterations=1, alpha=alpha, backend="cpu",
                      progress=False)
    assert r.params["alpha"] == 0.1  # not 50 / K = 1.0


def test_llpt_every_zero_gives_the_llpt_of_the_last_iteration_only(reuters_path, tmp_path):
    """``llpt_every=0`` (as documented): the LLPT of the initial state and after the last iteration, a row
    for every iteration; a negative value is refused naming the parameter, and no model is written."""
    kw = dict(K=4, iterations=5, seed=1, backend="cpu", progress=False)
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "m", llpt_every=0, **kw)
    ll = pd.read_parquet(r.path / "llpt.parquet")
    assert list(ll["iteration"]) == list(range(6))
    assert list(ll["iteration"][ll["llpt"].notna()]) == [0, 5]
    with pytest.raises(ValueError, match="llpt_every"):
        pipelines.run("lda", str(reuters_path), out=tmp_path / "bad", llpt_every=-1, **kw)
    assert not (tmp_path / "bad").exists()


def test_text_corpus_settings_are_refused_with_a_counted_input(reuters_path, lee_path, tmp_path):
    """An LDA-C / UCI input holds counted word ids: tokenizer, reader and front-end settings would change
    nothing and are refused naming the parameter; ``vocab`` with a text corpus likewise.  The defaults pass."""
    kw = dict(K=3, iterations=1, backend="cpu", progress=False)
    for bad in ({"lowercase": False}, {"stemmer": "porter"}, {"min_len": 3}, {"max_len": 5},
                {"text_column": "text"}, {"blocksize": 1 << 20}, {"scheduler": "threads"}, {"n_workers": 2}):
        name = next(iter(bad))
        with pytest.raises(ValueError, match=f"{name}=.*setting of text corpora"):
            pipelines.run("lda", str(reuters_path), out=tmp_path / "bad", **kw, **bad)
    with pytest.raises(ValueError, match="vocab=.*text corpus"):
        pipelines.run("lda", str(lee_path), out=tmp_path / "bad", vocab=str(reuters_path), **kw)
    assert not (tmp_path / "bad").exists()
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "ok", lowercase=True, min_len=1, encoding="utf-8",
                      **kw)
    assert r.counts["K"] == 3


def test_chain_switch_and_callback_are_checked(reuters_path, tmp_path):
    """``exclude_self`` is a bool ("no" would sample with the token excluded), ``callback`` a function:
    both refused before the corpus is read."""
    kw = dict(K=3, iterations=1, backend="cpu", progress=False)
    with pytest.raises(ValueError, match="exclude_self must be True or False"):
        pipelines.run("lda", str(reuters_path), out=tmp_path / "bad", exclude_self="no", **kw)
    with pytest.raises(ValueError, match="callback must be a function"):
        pipelines.run("lda", str(reuters_path), out=tmp_path / "bad", callback=3, **kw)
    assert not (tmp_path / "bad").exists()


def test_transform_checks_seed_sampler_and_theta_columns(reuters_path, tmp_path):
    """The fold-in's ``seed`` and ``sampler`` are checked as train() checks them (an unknown sampler was
    sampled as sparse, seed=-1 overflowed, 1.5 was truncated); ``theta_columns=False`` with a list, whose
    result is the theta array, is refused."""
    r = pipelines.run("lda", str(reuters_path), out=tmp_path / "m", K=3, iterations=2, backend="cpu",
                      progress=False)
    model = LDAModel.load(r.path)
    docs = ["oil prices rose", "the bank raised rates"]
    for bad, match in (({"seed": -1}, "seed must be an integer >= 0"), ({"seed": 1.5}, "seed must be an integer"),
                       ({"seed": "x"}, "seed must be an integer"), ({"sampler": "bogus"}, "sampler must be one of"),
                       ({"theta_columns": False}, "theta_columns=False chooses the columns"),
                       ({"theta_columns": "no"}, "theta_columns must be True or False")):
        with pytest.raises(ValueError, match=match):
            model.transform(docs, backend="cpu", **bad)
    hybrid = model.transform(docs, backend="cpu", sampler="hybrid", iterations=3)
    np.testing.assert_array_equal(hybrid, model.transform(docs, backend="cpu", sampler="sparse", iterations=3))


# ----------------------------------------------------------------------------- reading a model without the papers

@pytest.fixture(scope="module")
def cacm_lines(tmp_path_factory, data_dir):
    """60 CACM titles and abstracts, one a line, the 5th line empty (a document without a token)."""
    with open(data_dir / "cacm" / "cacm.json", encoding="utf-8") as fh:
        texts = [" ".join(json.loads(line)["contents"].split(" CACM ")[0].split()) for line, _ in zip(fh, range(60))]
    texts[4] = ""
    path = tmp_path_factory.mktemp("cacm") / "cacm.txt"
    path.write_text("\n".join(texts) + "\n", encoding="utf-8")
    return path


def test_documents_table_holds_each_documents_main_topic(cacm_lines, tmp_path):
    r = pipelines.run("lda", cacm_lines, out=tmp_path / "m", K=4, iterations=5, min_df=1, max_df=1.0, backend="cpu",
                      progress=False)  # every word kept: document 4 alone is empty
    m = LDAModel.load(r.path)
    docs = pd.read_parquet(r.path / "documents.parquet")
    assert list(docs.columns) == ["doc_id", "source_id", "length", "topic", "topic_prob"]
    assert docs["topic"].dtype == np.int32 and docs["topic_prob"].dtype == np.float64
    theta = m.theta
    full = docs["length"].to_numpy() > 0
    assert not full[4] and full.sum() == 59
    np.testing.assert_array_equal(docs["topic"].to_numpy()[full], theta[full].argmax(1))  # lowest topic on a tie
    np.testing.assert_allclose(docs["topic_prob"].to_numpy(), theta.max(1), rtol=1e-12)
    assert docs["topic"].iloc[4] == -1 and docs["topic_prob"].iloc[4] == pytest.approx(1 / 4)
    pd.testing.assert_frame_equal(m.documents, docs)   # the loaded model reads the same columns
    # topic_table's docs count the same main topics
    np.testing.assert_array_equal(m.topic_table(3)["docs"], np.bincount(docs["topic"][full], minlength=4))


def test_theta_and_phi_are_properties_and_still_answer_a_call(reuters_path, tmp_path):
    from cutext.stages.engines.lda_model import CallableArray

    pipelines.run("lda", str(reuters_path), out=tmp_path / "m", K=3, iterations=2, progress=False)
    m = LDAModel.load(tmp_path / "m")
    for name, shape in (("theta", (395, 3)), ("phi", (3, 4258))):
        a = getattr(m, name)
        assert isinstance(a, np.ndarray) and isinstance(a, CallableArray) and a.shape == shape
        called = getattr(m, name)()   # the method spelling of earlier versions
        assert type(called) is np.ndarray and np.array_equal(called, a)
        np.testing.assert_allclose(a.sum(1), 1.0)
        assert type(a * 2) is np.ndarray and type(a.sum(0)) is np.ndarray   # arithmetic gives plain arrays
        assert repr(a).startswith("array(")


def test_cli_prints_the_top_words_of_every_topic(cacm_lines, tmp_path, capsys):
    from cutext.pipelines.__main__ import main

    base = ["lda", str(cacm_lines), "-K", "3", "--iterations", "2", "--backend", "cpu", "--no-progress"]
    assert main(base + ["--out", str(tmp_path / "a")]) == 0
    out = capsys.readouterr().out
    table = LDAModel.load(tmp_path / "a").topic_table(8)
    rows = re.findall(r"^  topic (\d) +([0-9.]+) % +(\d+) docs  (.+)$", out, flags=re.M)
    assert [int(k) for k, *_ in rows] == [0, 1, 2]
    assert [w for *_, w in rows] == table["words"].tolist() and all(len(w.split()) == 8 for *_, w in rows)
    assert [int(d) for _, _, d, _ in rows] == table["docs"].tolist()
    assert main(base + ["--out", str(tmp_path / "b"), "--top", "2"]) == 0
    assert all(len(w.split()) == 2 for *_, w in re.findall(r"^  topic (\d) +([0-9.]+) % +(\d+) docs  (.+)$",
                                                             capsys.readouterr().out, flags=re.M))
    assert main(base + ["--out", str(tmp_path / "c"), "--top", "0"]) == 0
    assert "topic 0" not in capsys.readouterr().out
    assert main(base + ["--out", str(tmp_path / "d"), "--json"]) == 0
    d = json.loads(capsys.readouterr().out)   # the topics inside the JSON document, nothing after it
    assert [t["topic"] for t in d["topics"]] == [0, 1, 2] and len(d["topics"][0]["words"].split()) == 8
    assert main(base + ["--out", str(tmp_path / "e"), "--top", "-1"]) == 2
    assert "--top must be an integer >= 0" in capsys.readouterr().err and not (tmp_path / "e").exists()
