"""Differential tests of the ARPA reader and NGramModel against the kenlm module (KenLM parity).

Every variant is generated from KenLM's own test model (../shared/data/arpa/kenlm/test.arpa) by a
small edit of its bytes; the kenlm module (0.3.0, default Config) is run on the same file. Where KenLM
loads a variant, cutext must load it and give the same sentence scores and the same per-token
``full_scores`` (log10 prob within 1e-4, n-gram length, OOV flag) on sentences with out-of-vocabulary
words; where KenLM refuses it, cutext must refuse it with an ArpaError naming the file and a line.

Deliberate differences (docs/decisions.md, "ARPA: KenLM semantics"): cutext also reads free text
before ``\\data\\``, spaces where KenLM wants a tab and trailing white space (the CMU files); those
variants are compared with KenLM on the same model written the way KenLM reads it. A positive log10
probability is set to 0 with a warning (KenLM's ``positive_log_probability=COMPLAIN``; its default
refuses the file), compared with KenLM on the model with 0 written in its place.
"""
from __future__ import annotations

import gzip
import math
import re
import warnings

import numpy as np
import pytest

from cutext.pipelines.ngram import NGramModel
from cutext.stages.readers.arpa import ArpaError, read_arpa

kenlm = pytest.importorskip("kenlm")

TOL = 1e-4
OOV = ["zzz", "<unk>", "<UNK>", "qq", "£biarritzé", "caf\u00e9"]


def _sub(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data, old
    return data.replace(old, new, 1)


def _sub_re(data: bytes, pattern: bytes, repl: bytes) -> bytes:
    out, n = re.subn(pattern, repl, data, count=1)
    assert n == 1, pattern
    return out


# name -> edit of test.arpa's bytes. KenLM loads all of these.
SAME = {
    "crlf": lambda s: s.replace(b"\n", b"\r\n"),
    "two_tabs": lambda s: s.replace(b"\t", b"\t\t"),
    "blank_lines": lambda s: s.replace(b"\\data\\\n", b"\n\n\\data\\\n").replace(
        b"\n\\2-grams:", b"\n\n\n\\2-grams:").replace(b"\n\\end\\", b"\n\n\\end\\\n\n"),
    "blank_line_in_section": lambda s: _sub(s, b"\n-1.687872\tbeyond", b"\n\n-1.687872\tbeyond"),
    "hash_comments_first": lambda s: b"# made by hand\n#\n\n" + s,
    "no_final_newline": lambda s: s.rstrip(b"\n"),
    "missing_backoff_1gram": lambda s: _sub(s, b"-1.687872\tbeyond\t-0.30103", b"-1.687872\tbeyond"),
    "missing_backoff_2gram": lambda s: _sub(s, b"-0.09132547\ta little\t-0.69897", b"-0.09132547\ta little"),
    "zero_backoff": lambda s: _sub(s, b"-1.687872\tbeyond\t-0.30103", b"-1.687872\tbeyond\t0"),
    "minus99_word": lambda s: _sub(s, b"-1.687872\tbeyond\t", b"-99\tbeyond\t"),
    "minus_inf_bos": lambda s: _sub(s, b"-99\t<s>", b"-inf\t<s>"),
    "minus_inf_word": lambda s: _sub(s, b"-1.687872\tbeyond\t", b"-inf\tbeyond\t"),
    "UNK_unigram": lambda s: _sub(s, b"\t<unk>\t", b"\t<UNK>\t"),
    "UNK_everywhere": lambda s: s.replace(b"<unk>", b"<UNK>"),
    "both_unk_UNK_later": lambda s: _sub(_sub(s, b"ngram 1=37", b"ngram 1=38"), b"-1.995635\t<unk>\t-20\n",
                                         b"-1.995635\t<unk>\t-20\n-3.5\t<UNK>\t-1\n"),
    "both_unk_unk_later": lambda s: _sub(_sub(s, b"ngram 1=37", b"ngram 1=38"), b"-1.995635\t<unk>\t-20\n",
                                         b"-3.5\t<UNK>\t-1\n-1.995635\t<unk>\t-20\n"),
    "latin1_words": lambda s: s.replace(b"biarritz", "£biarritzé".encode("latin-1")),
    "utf8_words": lambda s: s.replace(b"biarritz", "£biarritzé".encode("utf-8")),
    "vertical_tab_in_word": lambda s: s.replace(b"biarritz", b"biar\x0britz"),
}

# KenLM refuses these; cutext reads them (the CMU files' format): compared with KenLM on _kenlm_form.
LENIENT = {
    "spaces_not_tabs": lambda s: s.replace(b"\t", b" "),
    "spaces_in_ngrams_only": lambda s: s.split(b"\\2-grams:")[0] + b"\\2-grams:"
    + s.split(b"\\2-grams:")[1].replace(b"\t", b" "),
    "free_text_before_data": lambda s: b"Some free text about the model\n\\1-grams: (not a header)\n" + s,
    "trailing_spaces": lambda s: s.replace(b"\n", b" \n"),
}

# positive log10 probabilities: cutext sets 0 (warning naming the line); KenLM (default) refuses.
POSITIVE = {  # name -> (text of test.arpa, the positive variant, KenLM's clamp written out)
    "positive_1gram": (b"-1.687872\tbeyond\t", b"0.25\tbeyond\t", b"0\tbeyond\t"),
    "positive_inf_1gram": (b"-1.687872\tbeyond\t", b"inf\tbeyond\t", b"0\tbeyond\t"),
    "positive_2gram": (b"\n-0.09021038\tlittle more", b"\n0.5\tlittle more", b"\n0\tlittle more"),
}

# both refuse: cutext's error names the file and this line (a function of the variant's lines)
REJECT = {
    "count_too_high": (lambda s: _sub(s, b"ngram 2=47", b"ngram 2=48"), b"\\3-grams:"),
    "count_too_low": (lambda s: _sub(s, b"ngram 2=47", b"ngram 2=46"), None),
    "count_1grams_high": (lambda s: _sub(s, b"ngram 1=37", b"ngram 1=40"), b"\\2-grams:"),
    "no_end": (lambda s: s.replace(b"\\end\\", b""), None),
    "text_after_end": (lambda s: s + b"junk\n", b"junk"),
    "two_models_concatenated": (lambda s: s + s, b"\\data\\"),
    "word_not_in_unigrams": (lambda s: _sub_re(s, rb"(\n\\2-grams:\n-[0-9.]+\t)\S+", rb"\1nosuchword"),
                             None),
    "nan_prob": (lambda s: _sub(s, b"-1.687872\tbeyond\t", b"nan\tbeyond\t"), b"nan\tbeyond"),
    "minus_inf_backoff": (lambda s: _sub(s, b"beyond\t-0.30103", b"beyond\t-inf"), b"\tbeyond\t-inf"),
    "bad_number": (lambda s: _sub(s, b"-1.687872\tbeyond\t", b"-1.6x87872\tbeyond\t"), b"-1.6x87872"),
    "duplicate_unigram": (lambda s: s.replace(b"\tbiarritz\t", b"\tbeyond\t"), None),
}


@pytest.fixture(scope="module")
def src(arpa):
    return (arpa / "kenlm" / "test.arpa").read_bytes()


def _kenlm_form(data: bytes) -> bytes:
    """The model as KenLM reads it: from the \\data\\ line on, fields joined by one tab, no trailing blanks."""
    lines = data.replace(b"\r\n", b"\n").split(b"\n")
    start = next(i for i, ln in enumerate(lines) if ln.strip() == b"\\data\\")
    out = []
    for ln in lines[start:]:
        fields = [f for f in re.split(rb"[ \t\r]+", ln) if f]
        is_ngram = bool(fields) and re.fullmatch(rb"[-+]?(\d|\.|inf)[-+.\deE]*|[-+]?inf", fields[0]) is not None
        out.append((b"\t" if is_ngram else b" ").join(fields))
    return b"\n".join(out) + b"\n"


def _sentences(words, n=40, seed=0):
    """Sentences of the model's words and OOV words (and a blank one), deterministic."""
    rng = np.random.default_rng(seed)
    pool = [w for w in words if w not in ("<s>",)] + OOV
    out = [" ".join(rng.choice(pool, int(rng.integers(1, 9)))) for _ in range(n)]
    return out + ["", "looking on a little more loin", "zzz zzz zzz zzz"]


def _vocab_of(data: bytes, encoding="utf-8"):
    """The 1-gram words of an ARPA text (independent of the reader under test)."""
    text = data.decode(encoding, errors="replace").replace("\r", "")
    sec = text.split("\\1-grams:")[-1].split("\\2-grams:")[0].split("\\end\\")[0]
    return [ln.split()[1] for ln in sec.splitlines() if len(ln.split()) >= 2]


def _assert_like_kenlm(model: NGramModel, km, sentences, lengths=False):
    """Sentence scores and per-token (log10 prob, OOV flag) as KenLM's; with ``lengths`` the n-gram lengths
    too. test.arpa lacks suffixes of some n-grams ('consider higher' of 'also would consider higher'):
    KenLM inserts them as blank n-grams and reports their length, cutext backs off (same probability),
    so its lengths are compared on the suffix-complete models only."""
    sc = model.score(sentences)
    for i, s in enumerate(sentences):
        want = km.score(s)
        got = float(sc.log10_prob[i])
        assert (got == want) if math.isinf(want) else abs(got - want) <= TOL, (s, got, want)
        kf = list(km.full_scores(s))
        cf = sc.full_scores(i)
        assert len(kf) == len(cf), s
        for (kp, kn, ko), (cp, cn, co) in zip(kf, cf):
            assert ((cp == kp) if math.isinf(kp) else abs(cp - kp) <= TOL) and co == ko, (s, kf, cf)
            assert cn == kn or not lengths, (s, kf, cf)


def _load_both(path, encoding="utf-8"):
    km = kenlm.Model(str(path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = NGramModel.load(path, backend="cpu", encoding=encoding)
    return cm, km


def test_original_model_like_kenlm(src, tmp_path):
    p = tmp_path / "test.arpa"
    p.write_bytes(src)
    cm, km = _load_both(p)
    _assert_like_kenlm(cm, km, _sentences(_vocab_of(src)))


@pytest.mark.parametrize("name", sorted(SAME))
def test_variant_kenlm_accepts(src, tmp_path, name):
    """KenLM loads the variant: cutext loads it and scores every sentence (OOV words too) the same."""
    data = SAME[name](src)
    p = tmp_path / f"{name}.arpa"
    p.write_bytes(data)
    cm, km = _load_both(p)
    sents = _sentences(_vocab_of(data))
    _assert_like_kenlm(cm, km, sents)
    if name.startswith(("UNK", "both_unk")):
        assert not cm.unk_added and cm.vocab[cm.unk_id].as_py() in ("<unk>", "<UNK>")
        assert cm.word_ids(["<unk>", "<UNK>", "zzz"]).tolist() == [cm.unk_id] * 3


def test_latin1_model_bytes_and_encoding(src, tmp_path):
    """A latin-1 model (£ = 0xA3) loads as in KenLM: a warning names the first line with non-UTF-8 bytes,
    the words keep their bytes; bytes queries match as in KenLM; encoding='latin-1' matches str queries."""
    data = SAME["latin1_words"](src)
    p = tmp_path / "latin1.arpa"
    p.write_bytes(data)
    bad_line = data[: data.index("£".encode("latin-1"))].count(b"\n") + 1
    with pytest.warns(UserWarning, match=rf"latin1\.arpa:{bad_line}: bytes that are not valid utf-8"):
        m = read_arpa(p)
    assert m.invalid_bytes and "£biarritzé".encode("latin-1") in m.vocab_bytes.to_pylist()
    km = kenlm.Model(str(p))
    words = _vocab_of(data, "latin-1")
    sents = [s.encode("latin-1", errors="replace") for s in _sentences(words)]
    cm, _ = _load_both(p)
    _assert_like_kenlm(cm, km, sents)  # bytes queries, byte for byte
    _assert_like_kenlm(cm, km, _sentences(words))  # str queries: UTF-8 bytes, as KenLM's module encodes
    cl, _ = _load_both(p, encoding="latin-1")
    assert "£biarritzé" in cl.vocab.to_pylist()
    str_sents = [s for s in _sentences(words) if s.encode("latin-1", errors="replace") == s.encode("latin-1",
                                                                                                 errors="ignore")]
    got = cl.score(str_sents).log10_prob
    want = [km.score(s.encode("latin-1")) for s in str_sents]
    np.testing.assert_allclose(got, want, atol=TOL)
    with pytest.raises(ValueError, match="encoding"):
        NGramModel.load(p, backend="cpu", encoding="utf-16")


@pytest.mark.parametrize("name", sorted(LENIENT))
def test_variant_cutext_lenient(src, tmp_path, name):
    """KenLM refuses the variant (format only); cutext reads it as KenLM reads the same model in its form."""
    data = LENIENT[name](src)
    p = tmp_path / f"{name}.arpa"
    p.write_bytes(data)
    with pytest.raises(OSError):
        kenlm.Model(str(p))
    q = tmp_path / f"{name}.kenlm.arpa"
    q.write_bytes(_kenlm_form(data))
    km = kenlm.Model(str(q))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cm = NGramModel.load(p, backend="cpu")
    _assert_like_kenlm(cm, km, _sentences(_vocab_of(data)))


@pytest.mark.parametrize("name", sorted(POSITIVE))
def test_positive_log10_clamped(src, tmp_path, name):
    """A positive log10 probability (0.25, inf) is 0 with a warning naming its line, as KenLM with
    positive_log_probability=COMPLAIN; no crash (it was 'assignment destination is read-only')."""
    old, new, zero = POSITIVE[name]
    data = _sub(src, old, new)
    p = tmp_path / f"{name}.arpa"
    p.write_bytes(data)
    with pytest.raises(OSError, match="Positive log probability"):
        kenlm.Model(str(p))  # KenLM's default refuses
    line = data[: data.index(new)].count(b"\n") + 1 + new.startswith(b"\n")
    with pytest.warns(UserWarning, match=rf"{name}\.arpa:{line}: positive log10 probability"):
        cm = NGramModel.load(p, backend="cpu")
    q = tmp_path / f"{name}.zero.arpa"
    q.write_bytes(_sub(src, old, zero))
    km = kenlm.Model(str(q))
    _assert_like_kenlm(cm, km,
                       _sentences(_vocab_of(data)) + ["a little more", "beyond", "also beyond a little more loin"])


@pytest.mark.parametrize("name", sorted(REJECT))
def test_variant_both_reject(src, tmp_path, name):
    """KenLM refuses the variant; cutext raises ArpaError naming the file and the line."""
    edit, marker = REJECT[name]
    data = edit(src)
    p = tmp_path / f"{name}.arpa"
    p.write_bytes(data)
    with pytest.raises(OSError):
        kenlm.Model(str(p))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ArpaError, match=rf"{name}\.arpa:\d+: ") as ei:
            NGramModel.load(p, backend="cpu")
    line = int(re.search(rf"{name}\.arpa:(\d+): ", str(ei.value)).group(1))
    lines = data.split(b"\n")
    assert 1 <= line <= len(lines)
    if marker is not None:  # the line named is the offending one
        at = [i for i, ln in enumerate(lines, start=1) if marker in ln]
        assert line == (at[-1] if name == "two_models_concatenated" else at[0]), (str(ei.value), at)


@pytest.mark.parametrize("rel", ["100.lm.gz", "turtle.lm"])
def test_pocketsphinx_models_like_kenlm(arpa, tmp_path, rel):
    """The CMU toolkit models (<UNK>, spaces, free text first), sentences with OOV words, against KenLM on
    the same model in KenLM's form. 100.lm spells the unknown word <UNK>: no -100 substitute."""
    path = arpa / "pocketsphinx" / rel
    raw = path.read_bytes()
    data = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
    q = tmp_path / (rel.replace(".gz", "") + ".kenlm.arpa")
    q.write_bytes(_kenlm_form(data))
    km = kenlm.Model(str(q))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cm = NGramModel.load(path, backend="cpu")
    words = _vocab_of(_kenlm_form(data))
    _assert_like_kenlm(cm, km, _sentences(words, n=60, seed=3), lengths=True)
    if rel == "100.lm.gz":
        assert not cm.unk_added and cm.vocab[cm.unk_id].as_py() == "<UNK>"
        s = "david zzz huggins qq daines yy ww"  # four OOV words: was 388 log10 units below KenLM
        assert cm.score([s]).log10_prob[0] == pytest.approx(km.score(s), abs=TOL)


def test_pocketsphinx_unigram_model(arpa, tmp_path):
    """turtle.ug.lm is a unigram model: KenLM refuses it ('assumes at least a bigram model'); cutext reads
    it, and a sentence scores the sum of its words' unigram log10 probabilities (OOV: the -100 <unk>,
    the model having neither <unk> nor <UNK>), computed here from the file's text."""
    path = arpa / "pocketsphinx" / "turtle.ug.lm"
    q = tmp_path / "turtle.ug.kenlm.arpa"
    q.write_bytes(_kenlm_form(path.read_bytes()))
    with pytest.raises(OSError, match="at least a bigram"):
        kenlm.Model(str(q))
    section = path.read_text(encoding="utf-8").split("\\1-grams:")[1].split("\\end\\")[0]
    uni = {f[1]: float(f[0]) for f in (ln.split() for ln in section.splitlines()) if len(f) >= 2}
    with pytest.warns(UserWarning, match="no <unk>"):
        cm = NGramModel.load(path, backend="cpu")
    sents = _sentences([w for w in uni if w != "<s>"], n=30, seed=7)
    want = [sum(uni.get(w, -100.0) for w in s.split()) + uni["</s>"] for s in sents]
    np.testing.assert_allclose(cm.score(sents).log10_prob, want, atol=TOL)


# ----------------------------------------------------------------------------- GPU == CPU

@pytest.mark.gpu
@pytest.mark.parametrize("name, encoding", [("UNK_everywhere", "utf-8"), ("both_unk_UNK_later", "utf-8"),
                                            ("latin1_words", "utf-8"), ("latin1_words", "latin-1")])
def test_gpu_equals_cpu_unk_and_latin1(src, tmp_path, name, encoding):
    """The trie kernel on the GPU gives the CPU twin's scores on the <UNK> and latin-1 models (word ids
    are found on the host for both backends)."""
    data = SAME[name](src)
    p = tmp_path / f"{name}.arpa"
    p.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cpu = NGramModel.load(p, backend="cpu", encoding=encoding)
        gpu = NGramModel.load(p, backend="gpu", encoding=encoding)
    words = _vocab_of(data, "latin-1" if name.startswith("latin1") else "utf-8")
    sents = _sentences(words, n=200, seed=5)
    for batch in (sents, [s.encode("latin-1", errors="replace") for s in sents]):
        a, b = cpu.score(batch), gpu.score(batch)
        np.testing.assert_array_equal(a.token_log10_prob, b.token_log10_prob)
        np.testing.assert_array_equal(a.ngram_length, b.ngram_length)
        np.testing.assert_array_equal(a.oov, b.oov)
        np.testing.assert_array_equal(a.log10_prob, b.log10_prob)
