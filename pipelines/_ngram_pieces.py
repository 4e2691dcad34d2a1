"""The ngram pipeline's pieces: the model loaded, a piece of the corpus read (to host tables or device text
buffers) and scored whole or by row slices, on the host or the device (:mod:`cutext.pipelines.ngram`)."""
from __future__ import annotations

import pyarrow as pa

from cutext.kernels.backend import BACKENDS, to_host
from cutext.stages.engines.ngram_model import SCORE_COLUMNS, NGramModel
from cutext.stages.readers.files import read_piece
from cutext.stages.runtime.params import choice, param
from cutext.stages.text.ngram_text import TextBuffers, read_lines_buffers


def _read_texts(piece, fs):
    """One piece of the corpus as ``(source_id, text)`` host arrays (the reader of
    :mod:`cutext.stages.readers.files`)."""

    df = read_piece(piece, fs)
    src = pa.array(df["source_id"], pa.large_string(), from_pandas=True)
    texts = pa.array(df["text"], pa.large_string(), from_pandas=True).fill_null("")
    return pa.table({"source_id": src, "text": texts})


def _frame_texts(df):
    """A partition of a frame corpus (``source_id``, ``text``; pandas or cudf) as the host table of
    :func:`_read_texts`."""
    df = to_host(df)
    src = pa.array(df["source_id"], pa.large_string(), from_pandas=True)
    texts = pa.array(df["text"], pa.large_string(), from_pandas=True).fill_null("")
    return pa.table({"source_id": src, "text": texts})


def _read_for(lm, piece, fs):
    """A piece read for ``lm``: on a GPU model, a lines piece goes straight to device buffers
    (:func:`cutext.stages.text.ngram_text.read_lines_buffers`), anything else through the reader."""
    if lm.backend == "gpu":
        buf = read_lines_buffers(piece, fs, device=True)
        if buf is not None:
            return buf
    return _read_texts(piece, fs)


def _n_rows(texts) -> int:
    return texts.num_rows if isinstance(texts, pa.Table) else len(texts)


def _slice_bounds(n_rows: int, k: int, m: int) -> tuple[int, int]:
    """Rows ``[a, b)`` of slice ``k`` of ``m`` of a piece of ``n_rows`` rows (contiguous, in order, covering
    the piece; a slice may be empty when the piece has fewer rows than slices)."""
    return n_rows * k // m, n_rows * (k + 1) // m


def _slice_texts(texts, a: int, b: int):
    """Documents ``a:b`` of a read piece (a host table, or the text buffers of a lines piece), without a copy."""
    if (a, b) == (0, _n_rows(texts)):
        return texts
    if isinstance(texts, pa.Table):
        return texts.slice(a, b - a)
    return TextBuffers(texts.chars, texts.offsets[a:b + 1])


def _score_slice(lm, table, a: int, b: int, sentence: str, bos: bool, eos: bool):
    """Score documents ``a:b`` of a piece on the host: a host table of the per-document columns, and the
    address of the worker that scored it ("local" outside a worker)."""
    part = _slice_texts(table, a, b)
    if not isinstance(part, pa.Table):  # TextBuffers of a lines piece: numbered source ids
        cols = lm.score_documents(part, sentence, bos, eos)
        out = {"source_id": pa.nulls(b - a, pa.large_string())}
    else:
        cols = lm.score_documents(part["text"].combine_chunks(), sentence, bos, eos)
        out = {"source_id": part["source_id"].combine_chunks()}
    for name, dtype in SCORE_COLUMNS:
        out[name] = pa.array(to_host(cols[name]).astype(dtype))
    return pa.table(out), _worker_address()


def _worker_address() -> str:
    """The address of the dask worker running this code, ``"local"`` outside a worker."""
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return "local"


def _score_piece_device(lm, texts, sentence: str, bos: bool, eos: bool):
    """Score a whole piece on a GPU model and keep the per-document columns on the device: a cudf
    frame of :data:`SCORE_COLUMNS` (and ``source_id`` when the piece was read as a host table), for
    :class:`_ScoresWriter` with ``device=True``."""
    import cudf
    import cupy

    if isinstance(texts, pa.Table):
        cols = lm.score_documents(texts["text"].combine_chunks(), sentence, bos, eos)
        src = {"source_id": cudf.Series.from_arrow(texts["source_id"].combine_chunks())}
    else:
        cols = lm.score_documents(texts, sentence, bos, eos)
        src = {}
    stream = cupy.cuda.get_current_stream()
    if stream.ptr:  # scored on a stream of its own (:func:`_score_here`): complete before cudf takes the columns
        stream.synchronize()
    # nan_as_null=False: a NaN perplexity stays NaN (a null would also give the column a mask, and
    # cudf's writer then records a nullable pandas dtype, Float64, in the file's metadata)
    out = {name: cudf.Series(cupy.asarray(cols[name]).astype(dtype, copy=False), nan_as_null=False)
           for name, dtype in SCORE_COLUMNS}
    return cudf.DataFrame({**src, **out})


def _load_model(model, backend: str) -> NGramModel:
    """``model`` itself when it is a loaded :class:`NGramModel`, else the ARPA file it names, loaded.

    Raises
    ------
    ValueError
        ``backend`` not one of ``"auto"``, ``"cpu"``, ``"gpu"``, or, with a loaded model, other than
        ``"auto"`` and the model's own (its trie is where it was loaded).
    """
    backend = choice("backend", backend, BACKENDS)
    if isinstance(model, NGramModel):
        if backend not in ("auto", model.backend):  # the trie stays where it was loaded
            raise ValueError(f"{param('backend', backend)} but the loaded model is on the {model.backend.upper()} "
                             f"(NGramModel.load(..., backend={backend!r}) puts it there); drop "
                             f"{param('backend', bare=True)} or load the model with it")
        return model
    return NGramModel.load(model, backend=backend)


def _on_stream(stream, fn, *args):
    """``fn(*args)`` with ``stream`` current in this thread, the stream synchronized before it returns (its
    results complete for work on any other stream)."""
    with stream:
        out = fn(*args)
        stream.synchronize()
    return out
