// BM25 query engine (cutext.kernels.search.search_tiled): one block per query, documents in tiles of
// SB_TILE scores in shared memory.
//
// Index: term-major CSR (indptr int64 [V + 2], indices int32 doc ids sorted within a term, data float32
// stored weights >= 0).  Queries: CSR (q_ptr int64, q_terms int32 ascending, q_w float32 counts), rebased
// to the pass.  Device workspace per query q of a pass: two buffers of k keys and one cursor per query term.
// key = sortable(score) << 32 | (0xFFFFFFFF - doc): larger key = better (score desc, then doc asc).
// Filter (fmode): 0 every document; 1 the documents whose bit is set in allow_bits (uint32 words, bit d & 31
// of word d >> 5, one bitset for every query); 2 per query q the sorted doc ids a_docs[a_ptr[q], a_ptr[q + 1]).
// A document outside the filter is never a candidate, so the top k is taken among the allowed ones.
// Block b scores query q_order[b] (a permutation of the pass's queries, the costliest first: blocks start in
// index order, so the last to start are the cheapest and the kernel's tail, where SMs idle, is short).
// Numba twin: _twin_block_search, _twin_sort in search.py.  Compiled with --fmad=false.

#define SB_THREADS 256
#define SB_MAX_SORT 4096

__device__ __forceinline__ unsigned long long sb_key(float s, long long doc) {
    unsigned int u = __float_as_uint(s);
    u = (u & 0x80000000u) ? (0xFFFFFFFFu - u) : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (unsigned int)doc);
}

// The score of a key (sb_key's inverse on its high 32 bits)
__device__ __forceinline__ float sb_score(unsigned long long key) {
    unsigned int u = (unsigned int)(key >> 32);
    u = (u & 0x80000000u) ? (u & 0x7FFFFFFFu) : (0xFFFFFFFFu - u);
    return __uint_as_float(u);
}

// A pointer the compiler cannot see through: a posting's address is then one 32-bit multiply-add on a term's
// base (sb_step), not 64-bit arithmetic on the index's base plus the cursor (the CPU emulation has no asm).
template <class T>
__device__ __forceinline__ const T* sb_opaque(const T* p) {
#ifdef __CUDA_ARCH__
    asm("mov.b64 %0, %0;" : "+l"(p));
#endif
    return p;
}

// One step of the scoring of a tile [d0, d1) by one term of weight w: U * blockDim.x postings from offset r0
// of the term's postings idx / wts (len of them from its cursor on; 32-bit offsets: a term has fewer than
// n_docs < 2**31 - 2**16 postings), each thread loading its U doc ids and weights first (independent loads
// in flight), then adding those in the tile.  The tile's postings of a term are a prefix of them: the thread
// that meets the first posting out of the tile (offset 0, or one whose predecessor is in the tile) writes its
// offset to *next (a shared slot; cursor[j] itself is written after the term's barrier, since a slower thread
// may not have read it yet).  Returns whether all U postings of this thread were in the tile.
template <int U>
__device__ __forceinline__ bool sb_step(const int* __restrict__ idx, const float* __restrict__ wts,
                                        int r0, int len, int d0, int d1, float w, float* a, int* next) {
    int doc[U];
    float wt[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int r = r0 + u * (int)blockDim.x + (int)threadIdx.x;
        doc[u] = r < len ? __ldg(idx + r) : 0x7FFFFFFF;
        wt[u] = r < len ? __ldg(wts + r) : 0.0f;
    }
    bool all_in = true;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int r = r0 + u * (int)blockDim.x + (int)threadIdx.x;
        if (doc[u] < d1) {
            const float prod = w * wt[u];
            a[doc[u] - d0] = a[doc[u] - d0] + prod;
        } else {
            all_in = false;
            if (r == 0 || (r - 1 < len && __ldg(idx + r - 1) < d1)) *next = r;
        }
    }
    return all_in;
}

// The top k of query blockIdx.x over all documents, a tile of SB_TILE documents at a time in shared memory.
//
// Per tile [d0, d1): (1) score: the query's terms in ascending term id, each term's postings from its cursor
// (cursor[j], the first posting not yet consumed; postings are sorted by doc, so a tile's postings of a term
// are the next run of them) while doc < d1, added to the tile's float32 scores (the documents of one term are
// distinct, so no two threads touch one score, and __syncthreads_and is the barrier between steps and
// terms: every score is the float32 sum in the CPU engine's order); the thread that meets the first posting
// out of the tile moves the term's cursor there; (2) filter: a score > 0 of an allowed document (fmode; the
// tile's allowed bits are gathered into shared memory first) whose key beats
// theta (the k-th best key kept so far, 0 while fewer than k are kept) stays a candidate, every other score
// is reset to 0; (3) keep: when the kept and the candidates are fewer than k, the candidates are appended;
// otherwise the k largest of the kept and the candidates become the kept, and theta = the k-th largest key.
// With k <= SB_LIST / 2 the kept keys live in a shared list of SB_LIST keys, and the filter appends each
// candidate's key behind them: when they all fit, the k largest are found by rank (each key's place = how
// many of the list beat it; keys are distinct, so the places are 0..n-1) and the candidates' scores are reset
// through their keys, so a tile costs no further pass over its scores.  Otherwise (a larger k, or more
// candidates than the list holds, as in a query's first tiles) a radix select (8 passes of 8 bits,
// histograms in shared memory; exactly k keys are >= the k-th largest) of the kept and the tile's
// candidates gives the new k kept, written to the other buffer (top_a / top_b of the query; with the shared
// list, top_a then back to the list).  Candidates are reset to 0 as they are written.  At the end the kept
// keys (unordered) are in top_a, their number in top_n.
// Device memory: the two key buffers (k each) and a cursor per query term; the scores live in shared memory.
#ifndef SB_TILE
#define SB_TILE 8192
#endif
#ifndef SB_UNROLL
#define SB_UNROLL 4
#endif
#ifndef SB_QT
#define SB_QT 32  // query terms whose cursor, end and weight live in shared memory (6 blocks still fit an SM)
#endif
#ifndef SB_LIST
#define SB_LIST 256  // keys of the shared list (kept + a tile's candidates): a thread each when they are ranked
#endif
// Per-block timeline for benchmarks/micro/search_blocks.py (off by default): -DSB_PROFILE records, per block,
// %globaltimer at its start and end, its SM, and counts of tiles, scoring steps, appends, ranked and radix selects.
#ifdef SB_PROFILE
#define SB_PROF_BLOCKS 65536  // blocks recorded (queries of a pass)
#define SB_PROF_SLOTS 8
__device__ unsigned long long sb_prof[SB_PROF_BLOCKS * SB_PROF_SLOTS];
__device__ __forceinline__ unsigned long long sb_now() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}
#define SB_PROF_BEGIN unsigned long long prof_c[5] = {0, 0, 0, 0, 0}; const unsigned long long prof_t0 = sb_now();
#define SB_PROF_COUNT(i) (++prof_c[i])
#define SB_PROF_END                                                                                \
    if (threadIdx.x == 0 && q < SB_PROF_BLOCKS) {                                                  \
        unsigned int smid;                                                                         \
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));                                          \
        unsigned long long* r = sb_prof + (long long)q * SB_PROF_SLOTS;                            \
        r[0] = prof_t0; r[1] = sb_now(); r[2] = smid;                                              \
        for (int c = 0; c < 5; ++c) r[3 + c] = prof_c[c];                                          \
    }
#else
#define SB_PROF_BEGIN
#define SB_PROF_COUNT(i)
#define SB_PROF_END
#endif

extern "C" __global__ void __launch_bounds__(SB_THREADS, 6) bm25_block_search(const long long* __restrict__ indptr, const int* __restrict__ indices,
                                             const float* __restrict__ data, const long long* __restrict__ q_ptr,
                                             const int* __restrict__ q_terms, const float* __restrict__ q_w,
                                             int n_docs, int k, long long* cursor, unsigned long long* top_a,
                                             unsigned long long* top_b, int* top_n, int fmode,
                                             const unsigned int* __restrict__ allow_bits,
                                             const long long* __restrict__ a_ptr, const int* __restrict__ a_docs,
                                             const int* __restrict__ q_order) {
    const int q = q_order[blockIdx.x];
    SB_PROF_BEGIN
    const long long j0 = q_ptr[q], j1 = q_ptr[q + 1];
    __shared__ __align__(16) float a[SB_TILE];
    __shared__ unsigned int allow_sh[SB_TILE / 32];  // the tile's allowed documents (fmode 1, 2)
    __shared__ unsigned int hist[256], group_sh[32];
    __shared__ unsigned long long prefix_sh, mask_sh;
    __shared__ long long remaining_sh;
    __shared__ int next_sh[2];  // a term's first offset out of the tile (sb_step)
    __shared__ int cnt_sh, pos_sh;
    __shared__ unsigned long long sk[SB_LIST];  // the shared list: kept keys, then a tile's candidates
    unsigned long long* buf[2] = {top_a + (long long)q * k, top_b + (long long)q * k};
    const bool listed = 2 * k <= SB_LIST && SB_LIST <= (int)blockDim.x;  // the kept keys in sk (block-uniform)
    int cur = 0;
    int m = 0;                      // keys kept in buf[cur], or in sk[0, m) when listed
    unsigned long long theta = 0;   // a candidate's key must be > theta
    for (int i = threadIdx.x; i < SB_TILE; i += blockDim.x) a[i] = 0.0f;
    // a term's cursor, end and weight in shared memory for the query's first SB_QT terms (the rest in global memory):
    // a term's first loads in a tile wait on its cursor alone, not on q_terms -> indptr
    __shared__ long long cur_sh[SB_QT], end_sh[SB_QT];
    __shared__ float w_sh[SB_QT];
    for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) {
        const int t = q_terms[j];
        if (j - j0 < SB_QT) {
            cur_sh[j - j0] = indptr[t];
            end_sh[j - j0] = indptr[t + 1];
            w_sh[j - j0] = q_w[j];
        } else {
            cursor[j] = indptr[t];
        }
    }
    __syncthreads();
    for (long long d0 = 0; d0 < n_docs; d0 += SB_TILE) {
        const int d1 = (int)(n_docs - d0 < SB_TILE ? n_docs : d0 + SB_TILE);
        const int width = d1 - (int)d0;
        SB_PROF_COUNT(0);
        // (1) score the tile: a term's postings in steps of blockDim.x (the first) then SB_UNROLL * blockDim.x
        for (long long j = j0; j < j1; ++j) {
            const bool sh = j - j0 < SB_QT;
            const float w = sh ? w_sh[j - j0] : q_w[j];
            const long long end = sh ? end_sh[j - j0] : indptr[q_terms[j] + 1];
            const long long ps = sh ? cur_sh[j - j0] : cursor[j];
            const int* __restrict__ idx = sb_opaque(indices + ps);
            const float* __restrict__ wts = sb_opaque(data + ps);
            const int len = (int)(end - ps);
            int r0 = 0;
            bool first = true;  // most terms have fewer postings in a tile than a block has threads
            while (true) {
                const bool all_in = first ? sb_step<1>(idx, wts, r0, len, (int)d0, d1, w, a, &next_sh[j & 1])
                                          : sb_step<SB_UNROLL>(idx, wts, r0, len, (int)d0, d1, w, a, &next_sh[j & 1]);
                SB_PROF_COUNT(1);
                // also the barrier between terms (a thread going on alone to its next step measured 5 % slower)
                if (!__syncthreads_and(all_in)) break;
                r0 += first ? (int)blockDim.x : SB_UNROLL * (int)blockDim.x;
                first = false;
            }
            if (threadIdx.x == 0) {
                if (sh) cur_sh[j - j0] = ps + next_sh[j & 1]; else cursor[j] = ps + next_sh[j & 1];
            }
        }
        // (2) filter: candidates stay, the rest back to 0
        if (fmode == 1) {  // the tile's words of the bitset (d0 is a multiple of 32)
            for (int w = threadIdx.x; w < (width + 31) / 32; w += blockDim.x) allow_sh[w] = allow_bits[(d0 >> 5) + w];
        } else if (fmode == 2) {  // the query's allowed docs in [d0, d1): a run of its sorted list
            for (int w = threadIdx.x; w < SB_TILE / 32; w += blockDim.x) allow_sh[w] = 0u;
            long long lo = a_ptr[q], hi = a_ptr[q + 1];
            while (lo < hi) {  // first >= d0 (every thread finds the same bounds)
                const long long mid = (lo + hi) >> 1;
                if (a_docs[mid] < d0) lo = mid + 1; else hi = mid;
            }
            const long long first = lo;
            hi = a_ptr[q + 1];
            while (lo < hi) {  // first >= d1
                const long long mid = (lo + hi) >> 1;
                if (a_docs[mid] < d1) lo = mid + 1; else hi = mid;
            }
            __syncthreads();  // the words are zero before any bit is set
            for (long long p = first + threadIdx.x; p < lo; p += blockDim.x) {
                const int i = a_docs[p] - (int)d0;
                atomicOr(&allow_sh[i >> 5], 1u << (i & 31));
            }
        }
        if (threadIdx.x == 0) cnt_sh = 0;
        __syncthreads();
        // four scores a thread at once: a score of this tile beats theta iff it is > ts (theta's document comes
        // from an earlier tile, so on equal scores this tile's larger doc id loses), and a group of four with none
        // above ts is only cleared (when not zero already)
        const float ts = theta ? sb_score(theta) : 0.0f;
        int mine = 0;
        float4* a4 = reinterpret_cast<float4*>(a);
        for (int i4 = threadIdx.x; i4 < (width + 3) >> 2; i4 += blockDim.x) {  // past width the scores are 0
            const float4 v = a4[i4];
            if (fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)) > ts) {
                float e[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
                for (int u = 0; u < 4; ++u) {
                    const int i = 4 * i4 + u;
                    if (e[u] > ts && (fmode == 0 || ((allow_sh[i >> 5] >> (i & 31)) & 1u))) {
                        if (listed) {  // behind the kept keys, while the list has room
                            const int slot = m + atomicAdd(&cnt_sh, 1);
                            if (slot < SB_LIST) sk[slot] = sb_key(e[u], d0 + i);
                        } else {
                            ++mine;
                        }
                    } else {
                        e[u] = 0.0f;
                    }
                }
                a4[i4] = make_float4(e[0], e[1], e[2], e[3]);
            } else if (v.x != 0.0f || v.y != 0.0f || v.z != 0.0f || v.w != 0.0f) {
                a4[i4] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
        }
        if (mine) atomicAdd(&cnt_sh, mine);
        __syncthreads();
        const int cnt = cnt_sh;
        __syncthreads();  // cnt_sh is read by all before it is reset
        if (cnt == 0) continue;  // every thread sees the same cnt
        if (listed && m + cnt <= SB_LIST) {  // (3') the candidates are sk[m, m + cnt)
            const int n = m + cnt;
            for (int t = m + (int)threadIdx.x; t < n; t += blockDim.x)  // their scores back to 0
                a[(int)(0xFFFFFFFFu - (unsigned int)(sk[t] & 0xFFFFFFFFull)) - (int)d0] = 0.0f;
            if (n < k) {  // appended already
                SB_PROF_COUNT(2);
                m = n;
                __syncthreads();
                continue;
            }
            SB_PROF_COUNT(3);
            unsigned long long key = 0;
            int place = SB_LIST;
            if ((int)threadIdx.x < n) {  // a key's place in descending order
                key = sk[threadIdx.x];
                place = 0;
                for (int t = 0; t < n; ++t) place += sk[t] > key;
            }
            __syncthreads();  // every place counted before a key moves
            if (place < k) sk[place] = key;
            m = k;
            __syncthreads();
            theta = sk[k - 1];
            continue;
        }
        // the radix path: the kept keys in buf[cur] (or sk), the candidates in the tile's scores
        unsigned long long* kept = listed ? sk : buf[cur];
        if (!listed && (long long)m + cnt < k) {  // (3a) append
            SB_PROF_COUNT(2);
            if (threadIdx.x == 0) pos_sh = m;
            __syncthreads();
            for (int i = threadIdx.x; i < width; i += blockDim.x) {
                const float s = a[i];
                if (s > 0.0f) {
                    kept[atomicAdd(&pos_sh, 1)] = sb_key(s, d0 + i);
                    a[i] = 0.0f;
                }
            }
            m += cnt;
            __syncthreads();
            continue;
        }
        // (3b) radix select of the k largest among kept[0, m) and the tile's candidates
        SB_PROF_COUNT(4);
        if (threadIdx.x == 0) { prefix_sh = 0ull; mask_sh = 0ull; remaining_sh = k; }
        __syncthreads();
        for (int shift = 56; shift >= 0; shift -= 8) {
            for (int b = threadIdx.x; b < 256; b += blockDim.x) hist[b] = 0u;
            __syncthreads();
            const unsigned long long prefix = prefix_sh, mask = mask_sh;
            for (int i = threadIdx.x; i < m; i += blockDim.x) {
                const unsigned long long key = kept[i];
                if ((key & mask) == prefix) atomicAdd(&hist[(unsigned int)(key >> shift) & 255u], 1u);
            }
            for (int i = threadIdx.x; i < width; i += blockDim.x) {
                const float s = a[i];
                if (s > 0.0f) {
                    const unsigned long long key = sb_key(s, d0 + i);
                    if ((key & mask) == prefix) atomicAdd(&hist[(unsigned int)(key >> shift) & 255u], 1u);
                }
            }
            __syncthreads();
            if (threadIdx.x < 32) {  // the counts of 32 groups of 8 digits, so one thread then reads 40, not 256
                unsigned int c = 0;
                for (int b = 0; b < 8; ++b) c += hist[8 * threadIdx.x + b];
                group_sh[threadIdx.x] = c;
            }
            __syncthreads();
            if (threadIdx.x == 0) {  // the largest digit whose count from the top reaches rem
                long long rem = remaining_sh;
                int g = 31;
                for (; g > 0; --g) {
                    if ((long long)group_sh[g] >= rem) break;
                    rem -= group_sh[g];
                }
                int dg = 8 * g + 7;
                for (; dg > 8 * g; --dg) {
                    if ((long long)hist[dg] >= rem) break;
                    rem -= hist[dg];
                }
                remaining_sh = rem;
                prefix_sh = prefix | ((unsigned long long)dg << shift);
                mask_sh = mask | (255ull << shift);
                pos_sh = 0;
            }
            __syncthreads();
        }
        const unsigned long long kth = prefix_sh;  // the k-th largest key itself (distinct keys, all 64 bits)
        unsigned long long* next = listed ? buf[0] : buf[1 - cur];
        for (int i = threadIdx.x; i < m; i += blockDim.x) {
            const unsigned long long key = kept[i];
            if (key >= kth) next[atomicAdd(&pos_sh, 1)] = key;
        }
        for (int i = threadIdx.x; i < width; i += blockDim.x) {
            const float s = a[i];
            if (s > 0.0f) {
                const unsigned long long key = sb_key(s, d0 + i);
                if (key >= kth) next[atomicAdd(&pos_sh, 1)] = key;
                a[i] = 0.0f;
            }
        }
        m = k;
        theta = kth;
        __syncthreads();
        if (listed) {  // back to the list
            for (int i = threadIdx.x; i < k; i += blockDim.x) sk[i] = buf[0][i];
            __syncthreads();
        } else {
            cur = 1 - cur;
        }
    }
    if (listed)  // the kept keys end in top_a
        for (int i = threadIdx.x; i < m; i += blockDim.x) buf[0][i] = sk[i];
    else if (cur == 1)
        for (int i = threadIdx.x; i < m; i += blockDim.x) buf[0][i] = buf[1][i];
    if (threadIdx.x == 0) top_n[q] = m;
    SB_PROF_END
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
            score = sb_score(key);
        }
        out_doc[(long long)q * k + i] = doc;
        out_score[(long long)q * k + i] = score;
    }
}
