// ELLPACK similarity with block-local max reduction (Szasz and Samet, Algorithm 3), for cutext.
//
// The cluster matrix is ELLPACK, column-major: entry n of row r is at [n * stride + r]
// (stride = the row capacity, a multiple of 256, so every column starts aligned).  Rows are
// left-packed and sorted by term id; padding is term id -1, weight 0.
//
// Every function here mirrors kernels/cluster_ref.py / kernels/ellpack.py operation for operation
// (float64, the same merge order, `acc = acc + a * b`); compile with --fmad=false so no multiply-add
// is contracted and the results equal the CPU twin bit for bit.
//
// Ties: the largest similarity wins, and among equal similarities the lowest row id, so the
// reduction's result does not depend on the order in which it combines values.

#define CT_BLOCK 256
#define CT_MAX_K 512
#define CT_NO_ID 0x7fffffff

extern "C" {

// idx / w are not __restrict__: ct_block_max writes the update row before its thread reads it, and
// the read-only (non-coherent) cache must not serve those loads.
__device__ __forceinline__ double ct_dot(const int* idx, const double* w,
                                         long long stride, long long row, int K,
                                         const int* dterm, const double* dw, int dlen) {
    double acc = 0.0;
    int v = 0;
    for (int n = 0; n < K; ++n) {
        long long p = (long long)n * stride + row;
        int col = idx[p];
        if (col < 0) break;
        while (v < dlen && dterm[v] < col) ++v;
        if (v == dlen) break;
        if (dterm[v] == col) {
            double prod = w[p] * dw[v];
            acc = acc + prod;
            ++v;
        }
    }
    return acc;
}

// Document b of the batch (its L terms and weights, rows of K in dterm / dweight) into the block's
// shared memory, then a barrier.
__device__ __forceinline__ void ct_stage_doc(const int* __restrict__ dterm, const double* __restrict__ dweight,
                                             int b, int K, int L, int* s_term, double* s_dw) {
    for (int t = threadIdx.x; t < L; t += blockDim.x) {
        s_term[t] = dterm[(long long)b * K + t];
        s_dw[t] = dweight[(long long)b * K + t];
    }
    __syncthreads();
}

__device__ __forceinline__ bool ct_better(double s, int i, double bs, int bi) {
    return s > bs || (s == bs && i < bi);
}

// Tree reduction of (s_sim[t], s_id[t]), t < blockDim.x, into slot 0 by ct_better. Every thread of
// the block calls it after writing its own slot (it begins with the barrier that publishes them).
__device__ __forceinline__ void ct_block_reduce(double* s_sim, int* s_id, int tid) {
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            double o = s_sim[tid + s];
            int oi = s_id[tid + s];
            if (ct_better(o, oi, s_sim[tid], s_id[tid])) {
                s_sim[tid] = o;
                s_id[tid] = oi;
            }
        }
        __syncthreads();
    }
}

// One thread per cluster row, one grid row (blockIdx.y) per document of the batch.
// upd_row >= 0: the row in the update buffer (upd_idx, upd_w; K entries) is written into the
// matrix by its thread before that thread computes its dot product (Alg. 3 lines 10-19); only
// used with a single document (gridDim.y == 1), so no other block reads the row concurrently.
// out_sim / out_id: (n_docs, gridDim.x), the block-local maxima.
__global__ void ct_block_max(int* idx, double* w, long long stride, int n_rows, int K,
                             const int* __restrict__ dterm, const double* __restrict__ dweight,
                             const int* __restrict__ dlen,
                             int upd_row, const int* __restrict__ upd_idx, const double* __restrict__ upd_w,
                             double* out_sim, int* out_id) {
    __shared__ int s_term[CT_MAX_K];
    __shared__ double s_dw[CT_MAX_K];
    __shared__ double s_sim[CT_BLOCK];
    __shared__ int s_id[CT_BLOCK];
    const int b = blockIdx.y;
    const int tid = threadIdx.x;
    const int L = dlen[b];
    ct_stage_doc(dterm, dweight, b, K, L, s_term, s_dw);
    const long long row = (long long)blockIdx.x * blockDim.x + tid;
    double sim = -1.0;
    int id = CT_NO_ID;
    if (row < n_rows) {
        if (upd_row >= 0 && row == upd_row) {
            for (int n = 0; n < K; ++n) {
                idx[(long long)n * stride + row] = upd_idx[n];
                w[(long long)n * stride + row] = upd_w[n];
            }
        }
        sim = ct_dot(idx, w, stride, row, K, s_term, s_dw, L);
        id = (int)row;
    }
    s_sim[tid] = sim;
    s_id[tid] = id;
    ct_block_reduce(s_sim, s_id, tid);
    if (tid == 0) {
        out_sim[(long long)b * gridDim.x + blockIdx.x] = s_sim[0];
        out_id[(long long)b * gridDim.x + blockIdx.x] = s_id[0];
    }
}

// Several documents per block (micro-batches): each thread loads every entry of its row once and
// merges it against CT_DOCS documents, so the matrix is read once per CT_DOCS documents.  The sums
// are those of ct_dot (per document, the same additions in the same order).  K <= CT_MULTI_K.
#define CT_DOCS 8
#define CT_MULTI_K 64
__global__ void ct_block_max_multi(const int* idx, const double* w, long long stride, int n_rows, int K,
                                   const int* __restrict__ dterm, const double* __restrict__ dweight,
                                   const int* __restrict__ dlen, int n_docs, double* out_sim, int* out_id) {
    __shared__ int s_term[CT_DOCS * CT_MULTI_K];
    __shared__ double s_dw[CT_DOCS * CT_MULTI_K];
    __shared__ int s_len[CT_DOCS];
    __shared__ double s_sim[CT_DOCS * CT_BLOCK];
    __shared__ int s_id[CT_DOCS * CT_BLOCK];
    const int tid = threadIdx.x;
    const int d0 = blockIdx.y * CT_DOCS;
    int nd = n_docs - d0;
    if (nd > CT_DOCS) nd = CT_DOCS;
    if (tid < CT_DOCS) s_len[tid] = (tid < nd) ? dlen[d0 + tid] : 0;
    for (int i = tid; i < nd * K; i += blockDim.x) {
        int d = i / K;
        int t = i - d * K;
        s_term[d * CT_MULTI_K + t] = dterm[(long long)(d0 + d) * K + t];
        s_dw[d * CT_MULTI_K + t] = dweight[(long long)(d0 + d) * K + t];
    }
    __syncthreads();
    const long long row = (long long)blockIdx.x * blockDim.x + tid;
    double acc[CT_DOCS];
    int v[CT_DOCS];
    int live = 0;
#pragma unroll
    for (int d = 0; d < CT_DOCS; ++d) {
        acc[d] = 0.0;
        v[d] = 0;
        if (d < nd && s_len[d] > 0) ++live;
    }
    if (row < n_rows) {
        for (int n = 0; n < K && live > 0; ++n) {
            long long p = (long long)n * stride + row;
            int col = idx[p];
            if (col < 0) break;
            double wv = w[p];
#pragma unroll
            for (int d = 0; d < CT_DOCS; ++d) {
                if (d >= nd) continue;
                const int L = s_len[d];
                if (v[d] == L) continue;
                const int* tt = s_term + d * CT_MULTI_K;
                while (v[d] < L && tt[v[d]] < col) ++v[d];
                if (v[d] == L) { --live; continue; }
                if (tt[v[d]] == col) {
                    double prod = wv * s_dw[d * CT_MULTI_K + v[d]];
                    acc[d] = acc[d] + prod;
                    ++v[d];
                    if (v[d] == L) --live;
                }
            }
        }
    }
    for (int d = 0; d < CT_DOCS; ++d) {
        s_sim[d * CT_BLOCK + tid] = (row < n_rows) ? acc[d] : -1.0;
        s_id[d * CT_BLOCK + tid] = (row < n_rows) ? (int)row : CT_NO_ID;
    }
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            for (int d = 0; d < CT_DOCS; ++d) {
                double o = s_sim[d * CT_BLOCK + tid + s];
                int oi = s_id[d * CT_BLOCK + tid + s];
                if (ct_better(o, oi, s_sim[d * CT_BLOCK + tid], s_id[d * CT_BLOCK + tid])) {
                    s_sim[d * CT_BLOCK + tid] = o;
                    s_id[d * CT_BLOCK + tid] = oi;
                }
            }
        }
        __syncthreads();
    }
    if (tid < nd) {
        out_sim[(long long)(d0 + tid) * gridDim.x + blockIdx.x] = s_sim[tid * CT_BLOCK];
        out_id[(long long)(d0 + tid) * gridDim.x + blockIdx.x] = s_id[tid * CT_BLOCK];
    }
}

// Global argmax over the block maxima: one block per document.  best: (n_docs, 2) float64 =
// (similarity, row id), row id -1 when there is no row.
__global__ void ct_argmax(const double* __restrict__ in_sim, const int* __restrict__ in_id, int n_blocks,
                          double* best) {
    __shared__ double s_sim[CT_BLOCK];
    __shared__ int s_id[CT_BLOCK];
    const int b = blockIdx.x;
    const int tid = threadIdx.x;
    double sim = -1.0;
    int id = CT_NO_ID;
    for (int i = tid; i < n_blocks; i += blockDim.x) {
        double o = in_sim[(long long)b * n_blocks + i];
        int oi = in_id[(long long)b * n_blocks + i];
        if (ct_better(o, oi, sim, id)) {
            sim = o;
            id = oi;
        }
    }
    s_sim[tid] = sim;
    s_id[tid] = id;
    ct_block_reduce(s_sim, s_id, tid);
    if (tid == 0) {
        best[2 * b] = s_sim[0];
        best[2 * b + 1] = (s_id[0] == CT_NO_ID) ? -1.0 : (double)s_id[0];
    }
}

// Similarity of every document of the batch with every row: out (n_docs, n_rows).
__global__ void ct_scores(const int* __restrict__ idx, const double* __restrict__ w, long long stride,
                          int n_rows, int K, const int* __restrict__ dterm,
                          const double* __restrict__ dweight, const int* __restrict__ dlen, double* out) {
    __shared__ int s_term[CT_MAX_K];
    __shared__ double s_dw[CT_MAX_K];
    const int b = blockIdx.y;
    const int tid = threadIdx.x;
    const int L = dlen[b];
    ct_stage_doc(dterm, dweight, b, K, L, s_term, s_dw);
    const long long row = (long long)blockIdx.x * blockDim.x + tid;
    if (row < n_rows) {
        out[(long long)b * n_rows + row] = ct_dot(idx, w, stride, row, K, s_term, s_dw, L);
    }
}

// Write n_upd rows (row-major buffers r_idx / r_w, (n_upd, K)) into the column-major matrix.
__global__ void ct_scatter(int* idx, double* w, long long stride, int K, int n_upd,
                           const long long* __restrict__ rows, const int* __restrict__ r_idx,
                           const double* __restrict__ r_w) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)n_upd * K) return;
    long long u = i / K;
    int n = (int)(i - u * K);
    long long r = rows[u];
    idx[(long long)n * stride + r] = r_idx[i];
    w[(long long)n * stride + r] = r_w[i];
}

// ------------------------------------------------------------------ the whole stream in one launch
// ct_dot with the row's term ids loaded CT_CHUNK at a time (independent loads in flight instead of one
// round trip per entry); the same additions in the same order, so the same double.
#ifndef CT_CHUNK
#define CT_CHUNK 8
#endif
__device__ __forceinline__ double ct_dot_chunked(const int* idx, const double* w, long long stride, long long row,
                                                 int K, const int* dterm, const double* dw, int dlen) {
    double acc = 0.0;
    int v = 0;
    for (int n0 = 0; n0 < K; n0 += CT_CHUNK) {
        int col[CT_CHUNK];
#pragma unroll
        for (int u = 0; u < CT_CHUNK; ++u) col[u] = (n0 + u < K) ? idx[(long long)(n0 + u) * stride + row] : -1;
#pragma unroll
        for (int u = 0; u < CT_CHUNK; ++u) {
            const int c = col[u];
            if (c < 0) return acc;
            while (v < dlen && dterm[v] < c) ++v;
            if (v == dlen) return acc;
            if (dterm[v] == c) {
                double prod = w[(long long)(n0 + u) * stride + row] * dw[v];
                acc = acc + prod;
                ++v;
            }
        }
    }
    return acc;
}

// Barrier of every block of a launch whose blocks are all resident (ellpack.py bounds the grid by the device's
// occupancy): bar[0] counts arrivals, bar[1] is the
// generation the waiting blocks watch; the last block to arrive resets the count and opens the next one.
__device__ __forceinline__ void ct_grid_sync(unsigned int* bar) {
    __syncthreads();
    if (threadIdx.x == 0) {
        volatile unsigned int* gen = bar + 1;
        const unsigned int g = *gen;
        __threadfence();
        if (atomicAdd(bar, 1u) == gridDim.x - 1) {
            atomicExch(bar, 0u);
            __threadfence();
            atomicAdd(bar + 1, 1u);
        } else {
            while (*gen == g) {
            }
        }
        __threadfence();
    }
    __syncthreads();
}

// First position of t in the sorted a[0, n), or -1.
__device__ __forceinline__ int ct_find(const int* a, int n, int t) {
    int lo = 0, hi = n;
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (a[mid] < t) lo = mid + 1; else hi = mid;
    }
    return (lo < n && a[lo] == t) ? lo : -1;
}

// Szasz and Samet section 4.1 steps 1-5 (cluster_ref.merge_update) by the threads of one block, into row
// `row` of the matrix in place: the merged entries are the cluster's (weight c_w * c_norm, plus d_w * d_norm
// when the document holds the term) and the document's other terms (d_w * d_norm); the top K by (weight desc,
// term id asc) are kept, each entry's rank counted against all others (the order of the reference's insertion
// sort, which it equals because term ids are distinct); the norm is summed by one thread in term-id order.
__device__ void ct_merge_row(int* idx, double* w, double* c_norm, long long stride, long long row, int K,
                             const int* s_term, const double* s_dw, int L, double d_norm,
                             int* s_ci, double* s_cw, int* m_idx, double* m_w, unsigned char* m_keep,
                             int* s_oi, double* s_ow, int* s_int, double* s_dbl) {
    const int tid = threadIdx.x, B = blockDim.x;
    if (tid == 0) { s_int[0] = 0; s_int[1] = 0; }
    for (int n = tid; n < K; n += B) {
        s_ci[n] = idx[(long long)n * stride + row];
        s_cw[n] = w[(long long)n * stride + row];
    }
    __syncthreads();
    for (int n = tid; n < K; n += B)
        if (s_ci[n] >= 0) atomicMax(&s_int[0], n + 1);  // rows are left-packed
    __syncthreads();
    const int cl = s_int[0];
    const double cn = c_norm[row];
    const int slots = cl + L;
    for (int e = tid; e < slots; e += B) {
        if (e < cl) {
            const int jm = ct_find(s_term, L, s_ci[e]);
            const double a = s_cw[e] * cn;
            m_idx[e] = s_ci[e];
            if (jm >= 0) {
                const double b = s_dw[jm] * d_norm;
                m_w[e] = a + b;
            } else {
                m_w[e] = a;
            }
            atomicAdd(&s_int[1], 1);
        } else {
            const int jj = e - cl;
            if (ct_find(s_ci, cl, s_term[jj]) >= 0) {
                m_idx[e] = -1;  // merged into the cluster's entry
            } else {
                m_idx[e] = s_term[jj];
                m_w[e] = s_dw[jj] * d_norm;
                atomicAdd(&s_int[1], 1);
            }
        }
    }
    __syncthreads();
    const int m = s_int[1];
    const bool keep_all = m <= K;
    for (int e = tid; e < slots; e += B) {
        bool keep = false;
        if (m_idx[e] >= 0) {
            if (keep_all) {
                keep = true;
            } else {
                const double we = m_w[e];
                const int ie = m_idx[e];
                int rank = 0;
                for (int f = 0; f < slots; ++f) {
                    const int i_f = m_idx[f];
                    if (i_f >= 0 && (m_w[f] > we || (m_w[f] == we && i_f < ie))) ++rank;
                }
                keep = rank < K;
            }
        }
        m_keep[e] = keep ? 1 : 0;
    }
    __syncthreads();
    for (int e = tid; e < slots; e += B) {
        if (m_keep[e]) {
            const int ie = m_idx[e];
            int pos = 0;
            for (int f = 0; f < slots; ++f) pos += (m_keep[f] && m_idx[f] < ie) ? 1 : 0;
            s_oi[pos] = ie;
            s_ow[pos] = m_w[e];
        }
    }
    __syncthreads();
    const int n_out = keep_all ? m : K;
    if (tid == 0) {
        double ss = 0.0;
        for (int p = 0; p < n_out; ++p) ss = ss + s_ow[p] * s_ow[p];
        s_dbl[0] = sqrt(ss);
        c_norm[row] = s_dbl[0];
    }
    __syncthreads();
    const double norm = s_dbl[0];
    for (int p = tid; p < K; p += B) {
        idx[(long long)p * stride + row] = p < n_out ? s_oi[p] : -1;
        w[(long long)p * stride + row] = p < n_out ? s_ow[p] / norm : 0.0;
    }
    __syncthreads();
}

// Algorithm 1 (Szasz and Samet) over documents 0 .. n_docs-1 in order, in one launch of resident blocks: the whole
// micro-batch-of-one stream with no host round trip per document.  Row r belongs to block (r / blockDim.x) %
// gridDim.x for the whole launch: that block alone scores it, and updates it (the merge, or a new cluster's
// first vector), so a row is never read by a block other than the one that wrote it.  Per document: every
// block's best row (ct_dot_chunked, ties to the lowest row), a grid barrier, then every block reduces the
// block maxima to the same global best and takes the same decision (join when sim > threshold, else a new
// cluster at row n_rows); the block maxima alternate between two halves of blk_* by round, so a block may
// write the next round's while a slower one still reads this round's.  The row capacity (stride) must hold
// n_rows0 + n_docs rows.  out_cluster / out_sim / out_new as cluster_ref.apply_decision; out_n_rows[0]: rows after.
__global__ void ct_sequential(int* idx, double* w, double* c_norm, long long stride, int n_rows0, int K,
                              const int* __restrict__ dterm, const double* __restrict__ dweight,
                              const int* __restrict__ dlen, const double* __restrict__ dnorm, int n_docs,
                              double threshold, double* blk_sim, int* blk_id, unsigned int* bar,
                              long long* out_cluster, double* out_sim, unsigned char* out_new, int* out_n_rows) {
    __shared__ int s_term[CT_MAX_K];
    __shared__ double s_dw[CT_MAX_K];
    __shared__ double s_sim[CT_BLOCK];
    __shared__ int s_id[CT_BLOCK];
    __shared__ int s_ci[CT_MAX_K];
    __shared__ double s_cw[CT_MAX_K];
    __shared__ int m_idx[2 * CT_MAX_K];
    __shared__ double m_w[2 * CT_MAX_K];
    __shared__ unsigned char m_keep[2 * CT_MAX_K];
    __shared__ int s_oi[CT_MAX_K];
    __shared__ double s_ow[CT_MAX_K];
    __shared__ int s_int[2];
    __shared__ double s_dbl[1];
    const int tid = threadIdx.x;
    const int G = gridDim.x, B = blockDim.x, me = blockIdx.x;
    int n_rows = n_rows0;
    int round = 0;
    for (int j = 0; j < n_docs; ++j) {
        const int L = dlen[j];
        if (L == 0) {  // no term: joins nothing, creates nothing (the same in every block, no barrier)
            if (me == 0 && tid == 0) { out_cluster[j] = -1; out_sim[j] = 0.0; out_new[j] = 0; }
            continue;
        }
        ct_stage_doc(dterm, dweight, j, K, L, s_term, s_dw);
        double sim = -1.0;
        int id = CT_NO_ID;
        for (long long r0 = (long long)me * B; r0 < n_rows; r0 += (long long)G * B) {
            const long long row = r0 + tid;
            if (row < n_rows) {
                const double s = ct_dot_chunked(idx, w, stride, row, K, s_term, s_dw, L);
                if (ct_better(s, (int)row, sim, id)) { sim = s; id = (int)row; }
            }
        }
        s_sim[tid] = sim;
        s_id[tid] = id;
        ct_block_reduce(s_sim, s_id, tid);
        const int half = (round & 1) * G;
        if (tid == 0) { blk_sim[half + me] = s_sim[0]; blk_id[half + me] = s_id[0]; }
        ct_grid_sync(bar);
        sim = -1.0;
        id = CT_NO_ID;
        for (int i = tid; i < G; i += B) {  // L2 reads: other blocks wrote these
            const double o = __ldcg(blk_sim + half + i);
            const int oi = __ldcg(blk_id + half + i);
            if (ct_better(o, oi, sim, id)) { sim = o; id = oi; }
        }
        s_sim[tid] = sim;
        s_id[tid] = id;
        ct_block_reduce(s_sim, s_id, tid);
        const double best = s_sim[0];
        const int best_c = s_id[0];
        const bool joined = best_c != CT_NO_ID && best > threshold;
        const long long target = joined ? (long long)best_c : (long long)n_rows;
        if (me == 0 && tid == 0) {
            out_sim[j] = best > 0.0 ? best : 0.0;
            out_cluster[j] = target;
            out_new[j] = joined ? 0 : 1;
        }
        if ((int)((target / B) % G) == me) {
            if (joined) {
                ct_merge_row(idx, w, c_norm, stride, target, K, s_term, s_dw, L, dnorm[j], s_ci, s_cw, m_idx, m_w,
                             m_keep, s_oi, s_ow, s_int, s_dbl);
            } else {
                for (int p = tid; p < K; p += B) {
                    idx[(long long)p * stride + target] = p < L ? s_term[p] : -1;
                    w[(long long)p * stride + target] = p < L ? s_dw[p] : 0.0;
                }
                if (tid == 0) c_norm[target] = dnorm[j];
            }
        }
        if (!joined) ++n_rows;
        ++round;
        __syncthreads();  // s_term, s_sim are rewritten by the next document
    }
    if (me == 0 && tid == 0) out_n_rows[0] = n_rows;
}

// ------------------------------------------------------------------ candidate pass (inverted index)
// The device inverted index of one row partition: the posting list of term t (the rows that gained t)
// is the segment pool[t_off[t] .. t_off[t] + t_len[t]) of one int32 pool; terms >= n_terms have none.
// Entries are appended by the host and never removed (a stale entry only adds a candidate, whose exact
// similarity is computed).  seen: (n_docs, seen_words) uint32 bitmaps (bit r of a document: row r is
// already a candidate), all zero between passes: ct_cand_block_max clears the bits it reads.

// Candidate rows of every document (blockIdx.y): the union of its terms' posting lists, each row once,
// appended to cand[cand_off[b] ..] in no particular order (cand_n[b] counts them; zero on entry).
// Grid-stride over the document's posting entries.  upd_row >= 0: block (0, 0) first writes the update
// buffer into the matrix (Alg. 3); the scoring kernel, launched after this one, sees the row.
__global__ void ct_cand_gather(const int* __restrict__ dterm, const int* __restrict__ dlen, int K,
                               const long long* __restrict__ t_off, const int* __restrict__ t_len, long long n_terms,
                               const int* __restrict__ pool, unsigned int* seen, long long seen_words,
                               const long long* __restrict__ cand_off, int* cand, int* cand_n,
                               int* idx, double* w, long long stride,
                               int upd_row, const int* __restrict__ upd_idx, const double* __restrict__ upd_w) {
    __shared__ long long s_pre[CT_MAX_K + 1];
    __shared__ long long s_off[CT_MAX_K];
    const int b = blockIdx.y;
    const int tid = threadIdx.x;
    const int L = dlen[b];
    if (upd_row >= 0 && b == 0 && blockIdx.x == 0) {
        for (int n = tid; n < K; n += blockDim.x) {
            idx[(long long)n * stride + upd_row] = upd_idx[n];
            w[(long long)n * stride + upd_row] = upd_w[n];
        }
    }
    for (int t = tid; t < L; t += blockDim.x) {
        const int term = dterm[(long long)b * K + t];
        const bool has = term >= 0 && (long long)term < n_terms;
        s_off[t] = has ? t_off[term] : 0;
        s_pre[t + 1] = has ? (long long)t_len[term] : 0;
    }
    __syncthreads();
    if (tid == 0) {
        s_pre[0] = 0;
        for (int t = 0; t < L; ++t) s_pre[t + 1] += s_pre[t];
    }
    __syncthreads();
    const long long total = s_pre[L];
    unsigned int* my_seen = seen + (long long)b * seen_words;
    for (long long i = (long long)blockIdx.x * blockDim.x + tid; i < total; i += (long long)gridDim.x * blockDim.x) {
        int lo = 0, hi = L;  // the term slot: the largest t with s_pre[t] <= i
        while (hi - lo > 1) {
            const int mid = (lo + hi) >> 1;
            if (s_pre[mid] <= i) lo = mid; else hi = mid;
        }
        const int row = pool[s_off[lo] + (i - s_pre[lo])];
        const unsigned int bit = 1u << (row & 31);
        const unsigned int old = atomicOr(my_seen + (row >> 5), bit);
        if (!(old & bit)) {
            const int k = atomicAdd(cand_n + b, 1);
            cand[cand_off[b] + k] = row;
        }
    }
}

// Similarity of every candidate row (ct_dot, the same sums as the all-rows kernels) and the block-local
// max, ties to the lowest row; blockIdx.y = document, grid-stride over its cand_n[b] candidates.
// out_sim / out_id: (n_docs, gridDim.x), (-1, CT_NO_ID) for a block without candidates; ct_argmax
// then gives the best (similarity, row) per document, (-1, -1) when it has no candidate.
// Clears the seen bit of every candidate it reads.
__global__ void ct_cand_block_max(const int* idx, const double* w, long long stride, int K,
                                  const int* __restrict__ dterm, const double* __restrict__ dweight,
                                  const int* __restrict__ dlen, const int* __restrict__ cand,
                                  const long long* __restrict__ cand_off, const int* __restrict__ cand_n,
                                  unsigned int* seen, long long seen_words, double* out_sim, int* out_id) {
    __shared__ int s_term[CT_MAX_K];
    __shared__ double s_dw[CT_MAX_K];
    __shared__ double s_sim[CT_BLOCK];
    __shared__ int s_id[CT_BLOCK];
    const int b = blockIdx.y;
    const int tid = threadIdx.x;
    const int L = dlen[b];
    ct_stage_doc(dterm, dweight, b, K, L, s_term, s_dw);
    const int n = cand_n[b];
    const int* my_cand = cand + cand_off[b];
    unsigned int* my_seen = seen + (long long)b * seen_words;
    double sim = -1.0;
    int id = CT_NO_ID;
    for (long long k = (long long)blockIdx.x * blockDim.x + tid; k < n; k += (long long)gridDim.x * blockDim.x) {
        const int row = my_cand[k];
        const double s = ct_dot(idx, w, stride, row, K, s_term, s_dw, L);
        if (ct_better(s, row, sim, id)) {
            sim = s;
            id = row;
        }
        atomicAnd(my_seen + (row >> 5), ~(1u << (row & 31)));
    }
    s_sim[tid] = sim;
    s_id[tid] = id;
    ct_block_reduce(s_sim, s_id, tid);
    if (tid == 0) {
        out_sim[(long long)b * gridDim.x + blockIdx.x] = s_sim[0];
        out_id[(long long)b * gridDim.x + blockIdx.x] = s_id[0];
    }
}

// Apply the host's index changes: pool[pos[i]] = val[i] (i < n_pos), and the headers of the changed
// terms, t_off[terms[i]] = term_off[i], t_len[terms[i]] = term_len[i] (i < n_t).
__global__ void ct_index_update(int* pool, int n_pos, const long long* __restrict__ pos, const int* __restrict__ val,
                                long long* t_off, int* t_len, int n_t, const int* __restrict__ terms,
                                const long long* __restrict__ term_off, const int* __restrict__ term_len) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n_pos) pool[pos[i]] = val[i];
    if (i < n_t) {
        t_off[terms[i]] = term_off[i];
        t_len[terms[i]] = term_len[i];
    }
}

}  // extern "C"
