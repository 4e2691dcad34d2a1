// BM25 query engine (cutext.kernels.search.search_tiled): documents in tiles, one block per query.
//
// Index: term-major CSR (indptr int64 [V + 2], indices int32 doc ids sorted within a term, data float32
// stored weights >= 0).  Queries: CSR (q_ptr int64, q_terms int32 ascending, q_w float32 counts), rebased
// to the pass.  Workspace per query q of a pass: acc[q * tile, +tile) float32 (zero between passes),
// cand[q * tile, +cand_n[q]) int32 local doc ids touched in the tile, and the k best keys so far.
// key = sortable(score) << 32 | (0xFFFFFFFF - doc): larger key = better (score desc, then doc asc).
// Numba twin: _twin_tile_score, _twin_tile_select, _twin_sort in search.py.  Compiled with --fmad=false.

#define SB_THREADS 256
#define SB_MAX_SORT 4096

__device__ __forceinline__ long long sb_lower_bound(const int* a, long long lo, long long hi, int x) {
    while (lo < hi) {
        long long mid = (lo + hi) / 2;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

__device__ __forceinline__ unsigned long long sb_key(float s, long long doc) {
    unsigned int u = __float_as_uint(s);
    u = (u & 0x80000000u) ? (0xFFFFFFFFu - u) : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (unsigned int)doc);
}

// Scatter the postings of query blockIdx.x whose doc is in [d0, d1) into its tile, term after term in
// ascending term id (a barrier between terms: the documents of one term are distinct, so no two threads
// touch one score, and every score is the float32 sum in the CPU engine's order).
extern "C" __global__ void bm25_tile_score(const long long* __restrict__ indptr, const int* __restrict__ indices,
                                           const float* __restrict__ data, const long long* __restrict__ q_ptr,
                                           const int* __restrict__ q_terms, const float* __restrict__ q_w,
                                           int d0, int d1, long long tile, float* acc, int* cand, int* cand_n) {
    const int q = blockIdx.x;
    float* a = acc + (long long)q * tile;
    int* c = cand + (long long)q * tile;
    __shared__ int n_sh;
    __shared__ long long lo_sh, hi_sh;
    if (threadIdx.x == 0) n_sh = cand_n[q];
    __syncthreads();
    for (long long j = q_ptr[q]; j < q_ptr[q + 1]; ++j) {
        const int t = q_terms[j];
        const float w = q_w[j];
        if (threadIdx.x == 0) {
            long long lo = sb_lower_bound(indices, indptr[t], indptr[t + 1], d0);
            lo_sh = lo;
            hi_sh = sb_lower_bound(indices, lo, indptr[t + 1], d1);
        }
        __syncthreads();
        const long long lo = lo_sh, hi = hi_sh;
        for (long long p = lo + threadIdx.x; p < hi; p += blockDim.x) {
            const int d = indices[p] - d0;
            const float old = a[d];
            const float prod = w * data[p];
            const float nw = old + prod;
            a[d] = nw;
            if (old == 0.0f && nw != 0.0f) c[atomicAdd(&n_sh, 1)] = d;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) cand_n[q] = n_sh;
}

// The k largest keys among the tile's candidates of query blockIdx.x and the k kept from earlier tiles
// (top_in), by a radix select (8 passes of 8 bits, histograms in shared memory): keys are distinct, so
// exactly k keys are >= the k-th largest.  Written unordered to top_out; the tile is reset to zero.
extern "C" __global__ void bm25_tile_select(float* acc, int* cand, int* cand_n, long long tile, int d0, int k,
                                            const unsigned long long* top_in, const int* top_in_n,
                                            unsigned long long* top_out, int* top_out_n) {
    const int q = blockIdx.x;
    float* a = acc + (long long)q * tile;
    const int* c = cand + (long long)q * tile;
    const int n = cand_n[q];
    const int m = top_in_n[q];
    const long long total = (long long)n + m;
    const unsigned long long* ti = top_in + (long long)q * k;
    unsigned long long* to = top_out + (long long)q * k;
    __shared__ unsigned int hist[256];
    __shared__ unsigned long long prefix_sh;
    __shared__ unsigned long long mask_sh;
    __shared__ long long remaining_sh;
    __shared__ int pos_sh;
    if (total <= k) {
        for (long long i = threadIdx.x; i < total; i += blockDim.x)
            to[i] = i < n ? sb_key(a[c[i]], (long long)d0 + c[i]) : ti[i - n];
    } else {
        if (threadIdx.x == 0) { prefix_sh = 0ull; mask_sh = 0ull; remaining_sh = k; pos_sh = 0; }
        __syncthreads();
        for (int shift = 56; shift >= 0; shift -= 8) {
            for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0u;
            __syncthreads();
            const unsigned long long prefix = prefix_sh, mask = mask_sh;
            for (long long i = threadIdx.x; i < total; i += blockDim.x) {
                const unsigned long long key = i < n ? sb_key(a[c[i]], (long long)d0 + c[i]) : ti[i - n];
                if ((key & mask) == prefix) atomicAdd(&hist[(unsigned int)(key >> shift) & 255u], 1u);
            }
            __syncthreads();
            if (threadIdx.x == 0) {
                long long rem = remaining_sh;
                int dg = 255;
                for (; dg > 0; --dg) {
                    if ((long long)hist[dg] >= rem) break;
                    rem -= hist[dg];
                }
                remaining_sh = rem;
                prefix_sh = prefix | ((unsigned long long)dg << shift);
                mask_sh = mask | (255ull << shift);
            }
            __syncthreads();
        }
        const unsigned long long kth = prefix_sh;
        for (long long i = threadIdx.x; i < total; i += blockDim.x) {
            const unsigned long long key = i < n ? sb_key(a[c[i]], (long long)d0 + c[i]) : ti[i - n];
            if (key >= kth) to[atomicAdd(&pos_sh, 1)] = key;
        }
    }
    __syncthreads();
    for (long long i = threadIdx.x; i < n; i += blockDim.x) a[c[i]] = 0.0f;
    if (threadIdx.x == 0) {
        top_out_n[q] = (int)(total < k ? total : k);
        cand_n[q] = 0;
    }
}

// Rank the kept keys of query blockIdx.x (bitonic sort, descending, in shared memory) and write
// doc ids (int64, -1 past the end) and scores (float32, 0 past the end), k per query.
extern "C" __global__ void bm25_topk_sort(const unsigned long long* top, const int* top_n, int k,
                                          long long* out_doc, float* out_score) {
    const int q = blockIdx.x;
    const int n = top_n[q];
    __shared__ unsigned long long s[SB_MAX_SORT];
    int n2 = 1;
    while (n2 < n) n2 <<= 1;
    for (int i = threadIdx.x; i < n2; i += blockDim.x) s[i] = i < n ? top[(long long)q * k + i] : 0ull;
    __syncthreads();
    for (int size = 2; size <= n2; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < n2; i += blockDim.x) {
                const int j = i ^ stride;
                if (j > i) {
                    const unsigned long long x = s[i], y = s[j];
                    const bool desc = (i & size) == 0;
                    if (desc ? (x < y) : (x > y)) { s[i] = y; s[j] = x; }
                }
            }
            __syncthreads();
        }
    }
    for (int i = threadIdx.x; i < k; i += blockDim.x) {
        long long doc = -1;
        float score = 0.0f;
        if (i < n) {
            const unsigned long long key = s[i];
            doc = (long long)(0xFFFFFFFFu - (unsigned int)(key & 0xFFFFFFFFull));
            unsigned int u = (unsigned int)(key >> 32);
            u = (u & 0x80000000u) ? (u & 0x7FFFFFFFu) : (0xFFFFFFFFu - u);
            score = __uint_as_float(u);
        }
        out_doc[(long long)q * k + i] = doc;
        out_score[(long long)q * k + i] = score;
    }
}
