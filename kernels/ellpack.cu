// ELLPACK similarity with block-local max reduction (paper 002, Algorithm 3), for cutext.
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
    for (int t = tid; t < L; t += blockDim.x) {
        s_term[t] = dterm[(long long)b * K + t];
        s_dw[t] = dweight[(long long)b * K + t];
    }
    __syncthreads();
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
    for (int t = tid; t < L; t += blockDim.x) {
        s_term[t] = dterm[(long long)b * K + t];
        s_dw[t] = dweight[(long long)b * K + t];
    }
    __syncthreads();
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

}  // extern "C"
