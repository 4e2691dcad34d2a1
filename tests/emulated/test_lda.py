"""kernels/lda.cu, compiled for the host and run thread by thread, equals the numba twins draw for draw.

No GPU is needed: tests/cuda_emu/lda_emu.cpp defines the CUDA keywords away, runs every thread of a
launch in turn (``-ffp-contract=off``, the counterpart of ``--fmad=false``) and exposes one C function
per kernel.  This checks the CUDA source's logic and arithmetic against the CPU twins on a real corpus;
tests/gpu/test_lda.py checks the real kernels on a device.  Skipped without a C++ compiler.
"""
from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest

from cutext.kernels import lda as K_
from cutext.stages.engines.lda_chunk import build_chunks, read_ldac
from cutext.stages.engines.lda_gibbs import GibbsState, panel_words, resolve_sample_order

from helpers import build_cuda_emulation

pytestmark = pytest.mark.slow  # the fast tier (-m "not slow") leaves this module out

CU = Path(K_.__file__).with_name("lda.cu")


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    so = build_cuda_emulation(tmp_path_factory.mktemp("cuda-host"), CU, "lda_emu.cpp", define="LDA_CU",
                              flags=("-O2", "-ffp-contract=off", "-fno-fast-math"))
    return ctypes.CDLL(str(so))


def _c(a):
    if isinstance(a, np.ndarray):
        assert a.flags.c_contiguous
        return ctypes.c_void_p(a.ctypes.data)
    if isinstance(a, np.uint64):
        return ctypes.c_ulonglong(int(a))
    if isinstance(a, np.int64):
        return ctypes.c_longlong(int(a))
    if isinstance(a, (np.int32, int)):
        return ctypes.c_int(int(a))
    if isinstance(a, (np.float64, float)):
        return ctypes.c_double(float(a))
    raise TypeError(type(a))


def call(lib, name, *args):
    getattr(lib, name)(*[_c(a) for a in args])


@pytest.fixture(scope="module")
def reuters(shared_data):
    return read_ldac(shared_data / "bow" / "lda_reuters" / "reuters.ldac")


def test_rng_init_rebuild_prepare(lib, reuters):
    K = 50
    ch = build_chunks(reuters, K, n_chunks=2)
    n = np.int64(ch.n_tokens)
    u = np.empty(ch.n_tokens)
    call(lib, "h_uniform", np.uint64(2**63 + 9), np.uint64(77), ch.keys, n, u)
    np.testing.assert_array_equal(u, K_.uniform(2**63 + 9, 77, ch.keys))
    z = np.empty(ch.n_tokens, np.int32)
    call(lib, "h_init", np.uint64(3), ch.keys, n, np.int32(K), z)
    np.testing.assert_array_equal(z, K_.init_topics(3, ch.keys, K))
    W, nk, dt, dc, dn = K_.rebuild_counts(ch.word, ch.doc, z, ch.doc_ptr, ch.doc_tok, ch.V, K)
    Wh = np.zeros((ch.V, K), np.int32)
    call(lib, "h_rebuild_w", ch.word, z, n, np.int32(K), Wh)
    np.testing.assert_array_equal(Wh, W)
    keys = np.sort((ch.doc.astype(np.int64) * K + z)[ch.doc_tok])
    th, ch_, nh = np.zeros(ch.n_tokens, np.int32), np.zeros(ch.n_tokens, np.int32), np.zeros(ch.n_docs, np.int32)
    call(lib, "h_rebuild_d", ch.doc_ptr, keys, np.int32(ch.n_docs), np.int32(K), th, ch_, nh)
    np.testing.assert_array_equal(th, dt)
    np.testing.assert_array_equal(ch_, dc)
    np.testing.assert_array_equal(nh, dn)
    th, ch_, nh = np.zeros(ch.n_tokens, np.int32), np.zeros(ch.n_tokens, np.int32), np.zeros(ch.n_docs, np.int32)
    call(lib, "h_rebuild_d_hist", ch.doc_ptr, ch.doc_tok, z, np.int32(ch.n_docs), np.int32(K), th, ch_, nh)
    np.testing.assert_array_equal(nh, dn)
    np.testing.assert_array_equal(th, dt)  # padding past d_nnz is zero on both sides
    np.testing.assert_array_equal(ch_, dc)
    tb = K_.prepare_words(W, nk, 0.01, ch.V * 0.01)
    out = {"what": np.empty((ch.V, K), np.float32), "qcum": np.empty((ch.V, K), np.float32),
           "qtot": np.empty(ch.V), "top": np.empty((ch.V, 2), np.int32), "topv": np.empty((ch.V, 3), np.float32)}
    call(lib, "h_prepare", W, nk, np.int32(ch.V), np.int32(K), 0.01, ch.V * 0.01, out["what"], out["qcum"],
         out["qtot"], out["top"], out["topv"])
    for k in tb:
        np.testing.assert_array_equal(out[k], tb[k], err_msg=k)


WINDOW = 300


@pytest.fixture(scope="module")
def nips_long(shared_data):
    """The 40 longest NIPS documents (UCI bag of words; 2,900 to 6,300 tokens each)."""
    from cutext.stages.engines.lda_chunk import BagOfWords, read_uci

    bow = read_uci(shared_data / "bow" / "uci" / "docword.nips.txt.gz")
    keep = np.sort(np.argsort(-bow.doc_lengths, kind="stable")[:40])
    sl = [slice(bow.doc_ptr[d], bow.doc_ptr[d + 1]) for d in keep]
    ptr = np.concatenate([[0], np.cumsum([s.stop - s.start for s in sl])]).astype(np.int64)
    return BagOfWords(ptr, np.concatenate([bow.word[s] for s in sl]), np.concatenate([bow.count[s] for s in sl]),
                      bow.vocab, [bow.doc_names[d] for d in keep], "nips-longest-40")


@pytest.mark.parametrize("sampler,exclude,K,shift", [("sparse", True, 40, 0), ("sparse", False, 40, 7),
                                                     ("three_branch", True, 40, 19), ("three_branch", False, 300, 0),
                                                     ("dense", True, 40, 0), ("dense", False, 64, 0),
                                                     ("nips-sparse", True, 4096, 5),
                                                     ("nips-three_branch", True, 4096, 0)])
def test_sampling_kernels_draw_for_draw(lib, request, sampler, exclude, K, shift):
    """shift moves the emulated windows, so the warps of 32 tokens cut (word, document) runs at other places.
    The NIPS cases have D rows of more than 1,024 nonzeros: more than 32 entries a lane in the lane sums
    and in the walk of the S branch."""
    if sampler.startswith("nips-"):
        sampler = sampler[5:]
        corpus = request.getfixturevalue("nips_long")
    else:
        corpus = request.getfixturevalue("reuters")
    ch = build_chunks(corpus, K, n_chunks=2)
    st = GibbsState(ch, K, 0.1, 0.05, seed=11)
    n = np.int64(ch.n_tokens)
    if K > 1000:
        assert int(st.d_nnz.max()) > 1024
    for it in range(1, 5 if K <= 1000 else 3):
        if sampler == "dense":
            pw = panel_words(K)
            ptr, w0 = K_.word_panels(ch.word, pw, max_tokens=700)
            dnt_twin = np.empty((ch.n_docs, K), np.float32)
            K_._twin_dnt(st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.nk, K, st.alpha, st.vbeta, dnt_twin)
            dnt = np.empty((ch.n_docs, K), np.float32)
            call(lib, "h_dnt", st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.nk, np.int32(ch.n_docs), np.int32(K),
                 st.alpha, st.vbeta, dnt)
            np.testing.assert_array_equal(dnt, dnt_twin)
            Wp = np.zeros((int(w0.max()) + pw, K), np.int32)
            Wp[: ch.V] = st.W
            zh = np.empty(ch.n_tokens, np.int32)
            call(lib, "h_dense", np.int32(len(w0)), ptr, w0, st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic,
                 st.d_cnt, st.d_nnz, Wp, st.nk, dnt, np.int32(K), np.int32(pw), st.alpha, st.beta, st.vbeta, 1.0,
                 np.uint64(st.seed), np.uint64(it), np.int32(exclude), zh)
        else:
            # the emulated warp (32 threads meeting at a barrier in every shuffle) costs about a millisecond
            # per token on 2 cores: emulate windows at the start, middle and end of the chunk order
            zh = st.z.copy()
            fh = np.full(ch.n_tokens, -1, np.int8)
            tb = st.tables
            for a in (shift, ch.n_tokens // 2 - 97 + shift, ch.n_tokens - WINDOW - shift):
                w = slice(a, a + WINDOW)
                call(lib, "h_sample", np.int64(WINDOW), st.word[w], st.doc[w], st.keys[w],
                     st.z[w], st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.W, st.nk, tb["what"], tb["qcum"],
                     tb["qtot"], tb["top"], tb["topv"], np.int32(K), st.alpha, st.beta, st.vbeta, 1.0,
                     np.uint64(st.seed), np.uint64(it), np.int32(sampler == "three_branch"), np.int32(exclude),
                     zh[w], fh[w])
        st.sample_pass(it, sampler, exclude)
        if sampler == "dense":
            np.testing.assert_array_equal(zh, st._pending, err_msg=f"iteration {it}")
        else:
            _, flags = K_.sample(st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.W,
                                 st.nk, st.tables, alpha=st.alpha, beta=st.beta, vbeta=st.vbeta, seed=st.seed,
                                 iteration=it, three=sampler == "three_branch", exclude=exclude)
            done = fh >= 0
            assert done.sum() == 3 * WINDOW
            np.testing.assert_array_equal(zh[done], st._pending[done], err_msg=f"iteration {it}")
            np.testing.assert_array_equal(fh[done], flags[done], err_msg=f"iteration {it}")
        st.commit()
    terms = np.empty(ch.n_tokens)
    call(lib, "h_llpt", n, st.word, st.doc, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.tables["what"],
         st.tables["qtot"], np.int32(K), st.alpha, terms)
    np.testing.assert_allclose(terms.mean(), st.llpt(), rtol=1e-12)


@pytest.fixture(scope="module")
def kos_part(shared_data):
    """The first 1,200 KOS documents (UCI bag of words; short documents, words of up to K tokens)."""
    from cutext.stages.engines.lda_chunk import BagOfWords, read_uci

    bow = read_uci(shared_data / "bow" / "uci" / "docword.kos.txt.gz")
    e = int(bow.doc_ptr[1200])
    return BagOfWords(bow.doc_ptr[:1201].copy(), bow.word[:e], bow.count[:e], bow.vocab, bow.doc_names[:1200],
                      "kos-first-1200")


@pytest.mark.parametrize("corpus,K,exclude,doc_c", [("reuters", 40, True, 4), ("reuters", 24, False, 4),
                                                    ("reuters", 24, False, 0), ("nips_long", 4096, True, 4),
                                                    ("kos_part", 1000, True, 4)])
def test_hybrid_kernels_draw_for_draw(lib, request, corpus, K, exclude, doc_c):
    """The hybrid-W kernels (rebuild of the dense and sparse rows, per-pass tables, the thread-per-token
    sparse-word sampler over every token, a window of the dense-word tokens through lda_sample with the
    dense rows, Eq. 5) equal the numba twins along a chain.  NIPS at K = 4096: D rows of > 1,024 nonzeros and
    no dense word (n_dense = 0: every token takes the sparse-word path), the word side only.  KOS at
    K = 1000: short documents and long W rows, so the doc-side rule nnz(W[v]) > 4 nnz(D[d]) picks either side;
    doc_c = 0: every sparse-word token takes the doc side."""
    bow = request.getfixturevalue(corpus)
    ch = build_chunks(bow, K, n_chunks=2)
    st = GibbsState(ch, K, 0.1, 0.05, seed=11, w_layout="hybrid")
    st.doc_c = doc_c
    n = np.int64(ch.n_tokens)
    nd = ch.n_dense
    sparse = ch.word >= nd
    assert sparse.sum() > 0 and (nd > 0) == (corpus != "nips_long")
    if K > 1000:
        assert int(st.d_nnz.max()) > 1024
    for it in range(1, 4 if K < 1000 else 3):
        hw, ht = st.hw, st.htables
        Wd = np.zeros((nd, K), np.int32)
        call(lib, "h_rebuild_w_dense", st.word, st.z, n, np.int32(K), np.int32(nd), Wd)
        np.testing.assert_array_equal(Wd, hw.W_dense)
        Vs = hw.w_nnz.shape[0]
        keys = np.sort(((st.word.astype(np.int64) - nd) * K + st.z)[hw.word_tok])
        wt, wc, wn = np.zeros(len(keys), np.int32), np.zeros(len(keys), np.int32), np.zeros(Vs, np.int32)
        call(lib, "h_rebuild_d", hw.w_ptr, keys, np.int32(Vs), np.int32(K), wt, wc, wn)
        np.testing.assert_array_equal(wn, hw.w_nnz)
        np.testing.assert_array_equal(wt, hw.w_topic)
        np.testing.assert_array_equal(wc, hw.w_cnt)
        inv, rcum, ydoc, zsum = np.empty(K), np.empty(K), np.empty(ch.n_docs), np.empty(Vs)
        call(lib, "h_hybrid_topics", st.nk, np.int32(K), st.vbeta, inv, rcum)
        call(lib, "h_hybrid_doc_y", st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, np.int32(ch.n_docs), inv, ydoc)
        call(lib, "h_hybrid_word_z", hw.w_ptr, hw.w_topic, hw.w_cnt, hw.w_nnz, np.int32(Vs), inv, zsum)
        for name, a in (("inv", inv), ("rcum", rcum), ("ydoc", ydoc), ("zsum", zsum)):
            np.testing.assert_array_equal(a, ht[name], err_msg=name)
        zh = np.full(ch.n_tokens, -1, np.int32)
        fh = np.full(ch.n_tokens, -1, np.int8)
        call(lib, "h_sample_hybrid", n, st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz,
             np.int32(nd), hw.w_ptr, hw.w_topic, hw.w_cnt, hw.w_nnz, st.nk, inv, rcum, ydoc, zsum, np.int32(K),
             st.alpha, st.beta, st.vbeta, np.uint64(st.seed), np.uint64(it), np.int32(exclude), np.int32(doc_c), zh,
             fh)
        assert (zh[~sparse] == -1).all()  # threads of dense-word tokens return at once
        a, b = st._dense_ranges[0]
        w = slice(a, min(b, a + WINDOW))
        m = w.stop - w.start
        tb = st.tables
        call(lib, "h_sample", np.int64(m), st.word[w], st.doc[w], st.keys[w], st.z[w], st.doc_ptr, st.d_topic,
             st.d_cnt, st.d_nnz, hw.W_dense, st.nk, tb["what"], tb["qcum"], tb["qtot"], tb["top"], tb["topv"],
             np.int32(K), st.alpha, st.beta, st.vbeta, 1.0, np.uint64(st.seed), np.uint64(it), np.int32(0),
             np.int32(exclude), zh[w], fh[w])
        st.sample_pass(it, "hybrid", exclude)
        np.testing.assert_array_equal(zh[sparse], st._pending[sparse], err_msg=f"iteration {it}")
        np.testing.assert_array_equal(fh[sparse], st._flags[sparse], err_msg=f"iteration {it}")
        np.testing.assert_array_equal(zh[w], st._pending[w], err_msg=f"iteration {it}")
        np.testing.assert_array_equal(fh[w], st._flags[w], err_msg=f"iteration {it}")
        fl = np.bincount(st._flags[sparse], minlength=9)
        assert (fl[[5, 6]] > 0).all() and (fl[3] > 0) == exclude, fl
        if doc_c == 0:  # the doc side only
            assert fl[4] == 0 and (fl[[7, 8]] > 0).all(), fl
        elif corpus == "kos_part":
            assert (fl[[4, 7, 8]] > 0).all(), fl
        else:
            assert fl[4] > 0, fl
        st.commit()
        st.check_invariants()
    hw, ht, tb = st.hw, st.htables, st.tables
    terms = np.empty(ch.n_tokens)
    call(lib, "h_llpt_hybrid", n, st.word, st.doc, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, np.int32(nd),
         tb["what"], tb["qtot"], hw.w_ptr, hw.w_topic, hw.w_cnt, hw.w_nnz, ht["inv"], ht["rcum"], np.int32(K),
         st.alpha, st.beta, terms)
    np.testing.assert_allclose(terms.mean(), st.llpt(), rtol=1e-12)


@pytest.mark.parametrize("corpus,sampler,exclude,K,cap,shift", [
    # each sampler with and without exclusion, rows in and past shared memory, the default cap
    ("reuters", "sparse", False, 40, "median", 7), ("reuters", "three_branch", True, 300, "median", 19),
    ("nips_long", "sparse", True, 4096, "median", 5), ("nips_long", "three_branch", False, 1000, K_.DOC_CAP, 11)])
def test_sample_doc_order_draw_for_draw(lib, request, corpus, sampler, exclude, K, cap, shift):
    """lda_sample_doc (tokens in document-major order through doc_tok, D rows staged in shared memory) equals
    the numba twin draw for draw, z and flags, along a chain.  Windows of doc-major positions at the start,
    middle and end of the index (cutting documents at other places with shift).  cap = "median": the median
    D-row length of the documents the windows touch, so some rows are staged in shared memory and some are
    longer than the cap and read from global memory (asserted); NIPS at K = 4096: rows of > 1,024 nonzeros
    (more than 32 entries a lane in the lane sums and the S walk, on both paths).  K = 1000 with the default
    cap: the longest NIPS rows exceed it after the random start and fit a pass later."""
    bow = request.getfixturevalue(corpus)
    ch = build_chunks(bow, K, n_chunks=2)
    st = GibbsState(ch, K, 0.1, 0.05, seed=11)
    three = sampler == "three_branch"
    both = fit = over = 0
    seen: set = set()
    for it in range(1, 4 if corpus == "reuters" else 3):
        zh = np.full(ch.n_tokens, -1, np.int32)
        fh = np.full(ch.n_tokens, -1, np.int8)
        tb = st.tables
        wins = [np.ascontiguousarray(st.doc_tok[a: a + WINDOW])
                for a in (shift, ch.n_tokens // 2 - 97 + shift, ch.n_tokens - WINDOW - shift)]
        nz = st.d_nnz[st.doc[np.concatenate(wins)]]
        c = int(np.median(nz)) if cap == "median" else int(cap)
        both += int((nz <= c).any() and (nz > c).any())
        fit += int((nz <= c).sum())
        over += int((nz > c).sum())
        for tok in wins:
            call(lib, "h_sample_doc", np.int64(WINDOW), tok, st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic,
                 st.d_cnt, st.d_nnz, st.W, st.nk, tb["what"], tb["qcum"], tb["qtot"], tb["top"], tb["topv"],
                 np.int32(K), st.alpha, st.beta, st.vbeta, 1.0, np.uint64(st.seed), np.uint64(it), np.int32(three),
                 np.int32(exclude), np.int32(c), zh, fh)
        z_new, flags = K_.sample(st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.W,
                                 st.nk, tb, alpha=st.alpha, beta=st.beta, vbeta=st.vbeta, seed=st.seed, iteration=it,
                                 three=three, exclude=exclude, order="doc", doc_tok=st.doc_tok)
        done = fh >= 0
        assert done.sum() == 3 * WINDOW
        np.testing.assert_array_equal(zh[done], z_new[done], err_msg=f"iteration {it}")
        np.testing.assert_array_equal(fh[done], flags[done], err_msg=f"iteration {it}")
        st.sample_pass(it, sampler, exclude)
        np.testing.assert_array_equal(z_new, st._pending)  # the CPU twin does not depend on the order
        seen |= set(np.unique(flags[done]).tolist())
        st.commit()
    if K < 1000:  # the windows took every branch (S or Q, max topic, skipped, own topic)
        want = {K_.FLAG_SQ} | ({K_.FLAG_MAX, K_.FLAG_SKIP} if three else set()) | ({K_.FLAG_OWN} if exclude else set())
        assert want <= seen, seen
    if cap == "median":
        assert both > 0  # rows in shared memory and rows past the cap, in the same windows
    else:  # the default cap: the longest NIPS rows exceed it after the random start, fit it a pass later
        assert over > 0 and fit > 0, (over, fit)


def test_sample_order_argument_checks(reuters):
    ch = build_chunks(reuters, 20)
    st = GibbsState(ch, 20, 0.1, 0.05, seed=1)
    args = (st.word, st.doc, st.keys, st.z, st.doc_ptr, st.d_topic, st.d_cnt, st.d_nnz, st.W, st.nk, st.tables)
    kw = dict(alpha=st.alpha, beta=st.beta, vbeta=st.vbeta, seed=1, iteration=1)
    with pytest.raises(ValueError, match="order"):
        K_.sample(*args, **kw, order="topic")
    with pytest.raises(ValueError, match="doc_tok"):
        K_.sample(*args, **kw, order="doc")
    with pytest.raises(ValueError, match="sample_order"):
        GibbsState(ch, 20, 0.1, 0.05, seed=1, sample_order="topic")
    # "auto" resolves to an order the kernels take; an explicit order is kept; on the CPU the twin ignores it
    assert GibbsState(ch, 20, 0.1, 0.05, seed=1).sample_order in K_.ORDERS
    assert GibbsState(ch, 20, 0.1, 0.05, seed=1, sample_order="doc").sample_order == "doc"
    assert resolve_sample_order("auto", 12419, 1000, gpu=False) == "word"
    with pytest.raises(ValueError, match="sample_order"):
        resolve_sample_order("topics", 10, 10)
