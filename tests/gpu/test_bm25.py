"""GPU path == CPU path on the same input (run on the lent GPU machine; skipped without a device)."""
from __future__ import annotations

import json

import dask
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from cutext import pipelines
from cutext.kernels import _cuda
from cutext.kernels import search as ks
from cutext.kernels.backend import device_count, to_cudf
from cutext.pipelines import datasets
from cutext.stages.text.count import count_partition
from cutext.stages.text.tokenize import TokenizerConfig, tokenize_partition

from helpers import assert_same_index, cacm_topics, need_corpus, need_data, read_index

pytestmark = pytest.mark.gpu

ANALYSIS = dict(stopwords="lucene", stemmer="porter")


def _both(texts):
    pdf = pd.DataFrame({"doc_id": np.arange(len(texts), dtype=np.int64),
                        "text": pd.Series(list(texts), dtype=pd.StringDtype("pyarrow"))})
    return pdf, to_cudf(pdf)


@pytest.mark.parametrize("name", sorted(datasets.CORPORA))
@pytest.mark.parametrize("analysis", ["plain", "lucene+porter"])
def test_tokens_gpu_equal_cpu_on_every_corpus(name, analysis):
    """Tokenizer rules give the same tokens with cudf/nvtext as with pyarrow, corpus by corpus."""
    docs = need_corpus(name)
    cfg = TokenizerConfig.make() if analysis == "plain" else TokenizerConfig.make(**ANALYSIS)
    pdf, gdf = _both(docs["text"])
    cpu = tokenize_partition(pdf, cfg)
    gpu = tokenize_partition(gdf, cfg).to_pandas()
    assert len(cpu) > 0
    if len(cpu) != len(gpu) or not np.array_equal(cpu["doc_id"].to_numpy(), gpu["doc_id"].to_numpy()) \
            or cpu["token"].astype(str).tolist() != gpu["token"].astype(str).tolist():
        c = cpu.groupby("doc_id")["token"].apply(list)
        g = gpu.groupby("doc_id")["token"].apply(list)
        for doc in c.index.union(g.index):
            a = c.get(doc, [])
            b = g.get(doc, [])
            if list(a) != list(b):
                diff = [(x, y) for x, y in zip(a, b) if x != y][:5]
                pytest.fail(f"{name}: document {docs['source_id'][doc]} differs: cpu {len(a)} tokens, "
                            f"gpu {len(b)} tokens; first differences {diff}")
        pytest.fail(f"{name}: token streams differ")


def test_vocabulary_sorted_on_the_gpu_in_the_cpus_order():
    """Term ids are ranks in UTF-8 byte order: the device sort of the distinct terms (libcudf) gives the
    order of pyarrow's host sort, on every shared corpus's terms and on constructed ones (case, digits,
    accents, other scripts, U+FFFD, 4-byte characters, prefixes)."""
    from cutext.stages.text.encode import sorted_terms

    made = ["a", "A", "Z", "z", "0", "9", "aa", "a0", "ab", "é", "e\u0301", "ea", "ß", "ss", "\ufffd", "中文",
            "中", "日本", "😀", "😀a", "\U0001F600\U0001F601", "ÿ", "\u0100", "\u07ff", "\u0800", "\uffff",
            "x" * 300, "-", "_"]
    sets = {"made": made}
    for name, load in datasets.shared_corpora().items():
        docs = load()
        toks = tokenize_partition(_both(docs["text"])[0], TokenizerConfig.make())
        sets[name] = toks["token"].drop_duplicates().astype(str).tolist()
    for name, terms in sets.items():
        series = pd.Series(terms, dtype=pd.StringDtype("pyarrow"))
        cpu = sorted_terms(series)
        gpu = sorted_terms(to_cudf(series))
        assert len(set(terms)) == len(terms) == len(gpu) and gpu.type == cpu.type == pa.large_string(), name
        assert cpu.to_pylist() == sorted(terms, key=lambda t: t.encode("utf-8")), name
        assert gpu.to_pylist() == cpu.to_pylist(), name


def test_count_partition_gpu_equals_cpu():
    rng = np.random.default_rng(7)
    df = pd.DataFrame({"doc_id": np.sort(rng.integers(1000, 3000, 200_000)).astype(np.int64),
                       "term_id": rng.zipf(1.3, 200_000).clip(1, 50_000).astype(np.int32)})
    a = count_partition(df)
    b = count_partition(to_cudf(df)).to_pandas()
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


def _build(src, out, **kw):
    return pipelines.run("bm25", src, out=out, progress=False, **kw)


def test_cacm_index_gpu_equals_cpu(tmp_path, data_dir):
    """Format 1 (the GPU's writer of weighted term ranges and documents files) equals the CPU's; the
    segmented index: test_segmented_index_gpu_equals_cpu."""
    src = data_dir / "cacm" / "cacm.json"
    cpu = _build(src, tmp_path / "cpu", backend="cpu", index_format=1, **ANALYSIS)
    gpu = _build(src, tmp_path / "gpu", backend="gpu", scheduler="sync", index_format=1, **ANALYSIS)
    assert gpu.backend == "gpu" and cpu.backend == "cpu"
    assert_same_index(read_index(cpu.path), read_index(gpu.path))


def test_segmented_index_gpu_equals_cpu(tmp_path, data_dir):
    """index_format=2 built on the GPU (segments written from cudf partitions) loads to the matrix, statistics
    and results of the CPU's segmented index and of the CPU's format-1 index."""
    from cutext.stages.engines.bm25_index import BM25Index

    src = data_dir / "cacm" / "cacm.json"
    v1 = _build(src, tmp_path / "v1", backend="cpu", index_format=1, **ANALYSIS)
    cpu = _build(src, tmp_path / "cpu", backend="cpu", index_format=2, **ANALYSIS)
    gpu = _build(src, tmp_path / "gpu", backend="gpu", scheduler="sync", index_format=2, **ANALYSIS)
    assert gpu.counts == cpu.counts == v1.counts
    ref = BM25Index.load(v1.path, backend="cpu")
    for r in (cpu, gpu):
        got = BM25Index.load(r.path, backend="cpu")
        assert got.vocab.equals(ref.vocab) and list(got.source_ids) == list(ref.source_ids)
        for k in ("indptr", "indices", "data"):
            np.testing.assert_array_equal(getattr(got.matrix, k), getattr(ref.matrix, k), err_msg=k)
    queries = ["parallel sorting algorithms", "compiler optimization of loops"]
    on_gpu = BM25Index.load(gpu.path, backend="gpu")  # postings scattered on the device (merge_segments)
    for k in ("indptr", "indices", "data"):
        np.testing.assert_array_equal(getattr(on_gpu.matrix, k).get(), getattr(ref.matrix, k), err_msg=k)
    pd.testing.assert_frame_equal(on_gpu.search(queries, k=10), ref.search(queries, k=10))


def test_device_merge_equals_the_host_merge_on_many_segments(tmp_path, data_dir, monkeypatch):
    """merge_segments(device=True) on the GPU, CACM cut into many segments (several blocks a segment):
    every posting in the host's slot."""
    import cupy

    from cutext.stages.engines import segments

    r = _build(data_dir / "cacm" / "cacm.json", tmp_path / "ix", backend="cpu", index_format=2, blocksize=1 << 16,
               **ANALYSIS)
    names = json.loads((r.path / "index.json").read_text())["segments"]
    assert len(names) >= 3
    folders = [r.path / "segments" / n for n in names]
    host = segments.merge_segments(folders)
    monkeypatch.setattr(segments, "DEVICE_MERGE_BLOCK", 4099)
    dev = segments.merge_segments(folders, device=True)
    assert isinstance(dev.doc, cupy.ndarray) and isinstance(dev.tf, cupy.ndarray)
    np.testing.assert_array_equal(dev.doc.get(), host.doc)
    np.testing.assert_array_equal(dev.tf.get(), host.tf)
    np.testing.assert_array_equal(dev.indptr, host.indptr)


@pytest.fixture(scope="module")
def news_dir(tmp_path_factory):
    docs = datasets.load_20newsgroups(need_data("20newsgroups"))
    return datasets.write_files(docs, tmp_path_factory.mktemp("20news") / "posts")


@pytest.fixture(scope="module")
def news_cpu(news_dir, tmp_path_factory):
    r = _build(news_dir, tmp_path_factory.mktemp("n") / "cpu", backend="cpu", blocksize=4 << 20, **ANALYSIS)
    return r, read_index(r.path)


def test_20news_index_gpu_equals_cpu(news_dir, news_cpu, tmp_path):
    gpu = _build(news_dir, tmp_path / "gpu", backend="gpu", scheduler="sync", blocksize=4 << 20, **ANALYSIS)
    assert gpu.counts == news_cpu[0].counts
    assert_same_index(news_cpu[1], read_index(gpu.path))


def test_a_gpu_build_in_batches_equals_the_one_pass_build(news_dir, news_cpu, tmp_path, monkeypatch):
    """The in-process GPU build forced into batches (``stages/engines/index_writer.py``, each batch through the
    front end on the device with its own vocabulary): the one-pass GPU build's segments, files and index, and the
    CPU's index."""
    from cutext.stages.engines import index_writer as _bm25_build

    kw = dict(backend="gpu", scheduler="sync", blocksize=4 << 20, **ANALYSIS)
    ref = _build(news_dir, tmp_path / "one", **kw)
    seen = []
    front_end = _bm25_build._front_end
    monkeypatch.setattr(_bm25_build, "_batch_bytes", lambda info: ref.counts["input_bytes"] // 3)
    monkeypatch.setattr(_bm25_build, "_front_end", lambda run, s, *a, **k: seen.append(s.input_bytes) or
                        front_end(run, s, *a, **k))
    got = _build(news_dir, tmp_path / "batches", **kw)
    assert got.counts["batches"] == len(seen) >= 3 and max(seen) < ref.counts["input_bytes"] / 2
    a, b = (json.loads((r.path / "index.json").read_text()) for r in (ref, got))
    # the same segments and files; their contents compared decoded, not as bytes: on an H100 the device Parquet
    # writer gave two postings files of the batched build other bytes than the one-pass build's
    assert a["segments"] == b["segments"] and a["files"].keys() == b["files"].keys()
    assert_same_index(read_index(ref.path), read_index(got.path))
    assert_same_index(news_cpu[1], read_index(got.path))


def test_20news_index_on_cutexts_own_local_cuda_cluster_equals_cpu(news_dir, news_cpu, tmp_path, monkeypatch):
    """scheduler="cluster" on the GPU: cutext's own LocalCUDACluster, with GPU_THREADS_PER_WORKER threads a
    worker (two tasks in flight a GPU), gives the CPU index."""
    import dask_cuda

    from cutext.stages.runtime.compute import GPU_THREADS_PER_WORKER

    made = []
    real = dask_cuda.LocalCUDACluster

    def recording(*args, **kw):
        made.append(kw)
        return real(*args, **kw)

    monkeypatch.setattr(dask_cuda, "LocalCUDACluster", recording)
    gpu = _build(news_dir, tmp_path / "gpu", backend="gpu", scheduler="cluster", blocksize=4 << 20, **ANALYSIS)
    assert gpu.scheduler == "cluster" and len(made) == 1
    assert made[0]["threads_per_worker"] == GPU_THREADS_PER_WORKER == 2
    assert gpu.counts == news_cpu[0].counts
    assert_same_index(news_cpu[1], read_index(gpu.path))


def test_20news_index_on_two_gpus_equals_cpu(news_dir, news_cpu, tmp_path):
    if device_count() < 2:
        pytest.skip("needs 2 GPUs")
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    with LocalCUDACluster(n_workers=2) as cluster, Client(cluster) as client:
        gpu = _build(news_dir, tmp_path / "gpu2", backend="gpu", client=client, blocksize=4 << 20, **ANALYSIS)
    assert gpu.n_workers == 2 and gpu.scheduler == "client"
    assert gpu.counts["partitions"] >= 4
    assert_same_index(news_cpu[1], read_index(gpu.path))


def test_20news_index_on_two_workers_of_one_gpu_equals_cpu(news_dir, news_cpu, tmp_path, monkeypatch):
    """Two worker processes sharing GPU 0 (dask-cuda refuses a GPU twice, so distributed's LocalCluster):
    the 2-worker GPU path of format 1 (term ranges spread over the workers, the vocabulary scattered to them,
    slices moved between processes) on a one-GPU machine, with the index files written by both workers."""
    from distributed import Client, LocalCluster, get_task_stream

    from cutext.stages.engines import index_writer as _bm25_build
    from cutext.stages.runtime.compute import rmm_cupy

    monkeypatch.setattr(_bm25_build, "GPU_POSTINGS_PER_FILE", 400_000)
    # no work stealing: on this small corpus the scheduler may steal a task whose inputs are a few kB,
    # which says nothing of where cutext places it
    with dask.config.set({"distributed.scheduler.work-stealing": False}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(rmm_cupy)
        with get_task_stream(client) as ts:
            gpu = _build(news_dir, tmp_path / "gpu2", backend="gpu", client=client, blocksize=4 << 20,
                         index_format=1, **ANALYSIS)
    assert gpu.n_workers == 2 and gpu.counts["partitions"] >= 4
    writes = [t for t in ts.data if str(t["key"]).startswith("_write_part_gpu")]
    files = len(list((gpu.path / "postings").glob("*.parquet"))) + len(list((gpu.path / "documents").glob("*.parquet")))
    assert len(writes) == files and len({t["worker"] for t in writes}) == 2
    # each postings file is written where its term range was made (no range moved to its writer), and
    # the rows a range takes from the other worker are cut there, one slice task a range (only those move)
    slices = [t for t in ts.data if str(t["key"]).startswith("_term_slices")]
    ranges = [t for t in ts.data if str(t["key"]).startswith("_term_range")]
    assert ranges and len(slices) == len(ranges)
    moved = [(str(t["key"])[:48], t["worker"]) for t in writes + slices
             for s in t["startstops"] if s["action"] == "transfer"]
    assert not moved, moved
    assert len(list((gpu.path / "postings").glob("*.parquet"))) >= 4
    assert_same_index(news_cpu[1], read_index(gpu.path))


def _same_rows_close(cpu, gpu, rtol=1e-6):
    """Rows of two runs: the same (query, doc) pairs at >= 99.9 % (a float32 sum in another order can swap
    two documents whose scores differ in the last bit) and scores within ``rtol``."""
    assert len(cpu) == len(gpu) > 0
    m = cpu.merge(gpu, on=["query_id", "doc_id"], suffixes=("_c", "_g"))
    assert len(m) >= 0.999 * len(cpu)
    np.testing.assert_allclose(m["score_c"], m["score_g"], rtol=rtol)


@pytest.mark.parametrize("variant", ["lucene", "bm25+"])
def test_search_engines_gpu_equal_cpu(tmp_path, data_dir, variant):
    """GPU engine (search.cu) == CPU engine row for row and bit for bit (same float32 sums in the same
    term order, --fmad=false; equal scores by the smaller doc id), with one pass and with a 1 MiB
    workspace (many tiles and query passes); the cupyx sparse path within 1e-6."""
    r = _build(data_dir / "cacm" / "cacm.json", tmp_path / "idx", backend="cpu", variant=variant, k1=0.9, b=0.4,
               **ANALYSIS)
    topics = cacm_topics(data_dir)
    cpu = pipelines.BM25Index.load(r.path, backend="cpu")
    gpu = pipelines.BM25Index.load(r.path, backend="gpu")
    for k in (10, 100, 1000):
        want = cpu.search(topics, k=k, engine="cpu")
        pd.testing.assert_frame_equal(gpu.search(topics, k=k, engine="gpu"), want)
        pd.testing.assert_frame_equal(gpu.search(topics, k=k), want)  # auto = gpu engine
        pd.testing.assert_frame_equal(gpu.search(topics, k=k, engine="gpu", max_workspace=1 << 20), want)
        pd.testing.assert_frame_equal(cpu.search(topics, k=k, engine="sparse"), want)
        _same_rows_close(want, gpu.search(topics, k=k, engine="sparse"))


@pytest.mark.parametrize("options", [("-DSB_QT=1", "-DSB_UNROLL=2"), ("-DSB_TILE=1024",),
                                     ("-DSB_UNROLL=1", "-DSB_LIST=64")])
def test_search_engine_builds_equal_cpu(tmp_path, data_dir, monkeypatch, options):
    """The GPU engine's step, tile, shared list sizes and the query terms it keeps in shared memory change no row:
    builds of search.cu with another SB_UNROLL, SB_QT (the terms past the first read from global memory; the
    default keeps 32, and one CACM topic has 43), SB_TILE (a term's cursor crosses 8x more tile edges) or SB_LIST
    (k=10 fills a list of 64 keys, k=1000 takes the radix select) return the CPU engine's frames bit for bit, with
    one pass and with a 1 MiB workspace."""
    r = _build(data_dir / "cacm" / "cacm.json", tmp_path / "idx", backend="cpu", **ANALYSIS)
    topics = cacm_topics(data_dir)
    cpu = pipelines.BM25Index.load(r.path, backend="cpu")
    gpu = pipelines.BM25Index.load(r.path, backend="gpu")
    monkeypatch.setattr(ks, "_cuda", _cuda.Options(options))
    for k in (10, 1000):
        want = cpu.search(topics, k=k, engine="cpu")
        pd.testing.assert_frame_equal(gpu.search(topics, k=k, engine="gpu"), want)
        pd.testing.assert_frame_equal(gpu.search(topics, k=k, engine="gpu", max_workspace=1 << 20), want)


def _news_queries(n=3000):
    docs = datasets.load_20newsgroups(need_data("20newsgroups"))
    return [" ".join(t.split()[:8]) for t in docs["text"][:n]]


def test_20news_search_gpu_engine_equals_cpu_engine(news_cpu):
    r, _ = news_cpu
    queries = _news_queries()
    cpu = pipelines.BM25Index.load(r.path, backend="cpu")
    gpu = pipelines.BM25Index.load(r.path, backend="gpu")
    for k in (10, 1000):
        want = cpu.search(queries, k=k, engine="cpu")
        pd.testing.assert_frame_equal(gpu.search(queries, k=k, engine="gpu", batch_size=1024), want)
        pd.testing.assert_frame_equal(gpu.search(queries, k=k, engine="gpu", max_workspace=16 << 20), want)
        pd.testing.assert_frame_equal(cpu.search(queries, k=k, engine="sparse"), want)
        _same_rows_close(want, gpu.search(queries, k=k, engine="sparse"))


def test_20news_sharded_search_on_two_gpus_equals_one_index(news_cpu):
    if device_count() < 2:
        pytest.skip("needs 2 GPUs")
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    r, _ = news_cpu
    queries = _news_queries(2000)
    want = pipelines.BM25Index.load(r.path, backend="cpu").search(queries, k=100, engine="cpu")
    with LocalCUDACluster(n_workers=2) as cluster, Client(cluster) as client:
        sharded = pipelines.BM25Index.load(r.path, backend="gpu", client=client)
        assert sharded.backend == "gpu" and len(sharded.shards) == 2
        pd.testing.assert_frame_equal(sharded.search(queries, k=100), want)
        pd.testing.assert_frame_equal(sharded.search(queries, k=100, engine="gpu", max_workspace=8 << 20), want)


def test_real_device_oom_is_a_clear_error_and_leaves_no_output(tmp_path, shared_data):
    """With the RMM pool limited far below need (8 MiB) a GPU bm25 run fails with
    GPUOutOfMemoryError naming the remedies, and leaves neither an output nor a temporary."""
    import cupy
    import rmm
    from rmm.allocators.cupy import rmm_cupy_allocator

    from cutext.stages.runtime.compute import GPUOutOfMemoryError

    corpus = shared_data / "corpora" / "20news-bydate.tar.gz"
    out = tmp_path / "idx"
    prev = cupy.cuda.get_allocator()
    rmm.reinitialize(pool_allocator=True, initial_pool_size=4 << 20, maximum_pool_size=8 << 20)
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    try:
        with pytest.raises(GPUOutOfMemoryError, match="blocksize=.*LocalCUDACluster") as ei:
            pipelines.run("bm25", corpus, out=out, backend="gpu", scheduler="sync", progress=False)
    finally:
        rmm.reinitialize()
        cupy.cuda.set_allocator(prev)
    print(ei.value)
    assert not out.exists()
    assert [p.name for p in tmp_path.iterdir()] == []


def test_in_process_gpu_run_uses_a_stream_ordered_pool_and_restores_the_resource():
    """``device_pool()``: under RMM's default resource an in-process GPU run allocates from
    ``cudaMallocAsync``, and the previous resource is back afterwards; a caller's resource is kept;
    CuPy allocates from the resource in effect during the run, and its allocator is restored."""
    import rmm

    from cutext.stages.runtime.compute import compute_context, device_pool

    before = rmm.mr.get_current_device_resource()
    with compute_context("gpu", scheduler="sync") as info:
        inside = rmm.mr.get_current_device_resource()
        assert info.scheduler == "sync"
        if type(before) is rmm.mr.CudaMemoryResource:
            assert isinstance(inside, rmm.mr.CudaAsyncMemoryResource)
        else:
            assert inside is before
    assert rmm.mr.get_current_device_resource() is before
    mine = rmm.mr.StatisticsResourceAdaptor(before)
    rmm.mr.set_current_device_resource(mine)
    import cupy

    alloc = cupy.cuda.get_allocator()
    try:
        with device_pool() as installed:
            assert not installed and rmm.mr.get_current_device_resource() is mine
            # CuPy's arrays come from the same resource (one pool, counted by its statistics)
            def current():
                c = mine.allocation_counts  # a Statistics object, or a dict in older rmm
                return c["current_bytes"] if isinstance(c, dict) else c.current_bytes

            start = current()
            a = cupy.zeros(64 << 20, cupy.uint8)
            assert current() - start >= a.nbytes
            del a
            assert current() == start
        assert cupy.cuda.get_allocator() is alloc
    finally:
        rmm.mr.set_current_device_resource(before)


def test_local_gpu_cluster_workers_have_the_pool_and_no_nanny_environment(monkeypatch):
    """``local_gpu_cluster``: one worker a GPU with RMM's stream-ordered pool, two threads, the nanny's
    one-thread / malloc-trim environment unset and no sampling profiler."""
    import os

    from distributed import Client

    from cutext.pipelines import local_gpu_cluster
    from cutext.stages.runtime.compute import GPU_THREADS_PER_WORKER

    for k in ("OMP_NUM_THREADS", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.setenv(k, "0")
        monkeypatch.delenv(k)

    def probe(dask_worker):
        import rmm

        return (os.environ.get("OMP_NUM_THREADS"), os.environ.get("MALLOC_TRIM_THRESHOLD_"),
                type(rmm.mr.get_current_device_resource()).__name__, dask_worker.state.nthreads,
                dask.config.get("distributed.worker.profile.enabled"))

    with local_gpu_cluster(1) as cluster, Client(cluster) as c:
        [got] = c.run(probe).values()
    assert got == (None, None, "CudaAsyncMemoryResource", GPU_THREADS_PER_WORKER, False)
