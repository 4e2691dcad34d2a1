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
// Numba twin: _twin_block_search, _twin_sort in search.py.  Compiled with --fmad=false.

#define SB_THREADS 256
#define SB_MAX_SORT 4096

__device__ __forceinline__ unsigned long long sb_key(float s, long long doc) {
    unsigned int u = __float_as_uint(s);
    u = (u & 0x80000000u) ? (0xFFFFFFFFu - u) : (u | 0x80000000u);
    return ((unsigned long long)u << 32) | (unsigned long long)(0xFFFFFFFFu - (unsigned int)doc);
}

// One step of the scoring of a tile [d0, d1) by one term of weight w: U * blockDim.x postings from p0, each
// thread loading its U doc ids and weights first (independent loads in flight), then adding those in the
// tile.  The tile's postings of a term are a prefix of [p0, end): the thread that meets the first posting
// out of the tile writes its position to *next (a shared slot; cursor[j] itself is written after the
// term's last barrier, since a slower thread may not have read it yet).  Returns whether all U postings of
// this thread were in the tile.
// Variants (-D switches, none by default; kernels/search.py VARIANTS; every one gives the same keys):
// SB_JUMP: the thread that meets a term's first posting out of the tile also takes the minimum of those
//   doc ids (atomicMin in shared memory), so the next tile starts at that doc (rounded down to 32, for the
//   bitset words of fmode 1) instead of d0 + SB_TILE, and the query ends when no term has a posting left:
//   stretches of documents without any posting of the query cost nothing (no scan, no barrier).
// SB_TOUCHED: scoring flags each group of 32 documents it adds to (a plain store of 1, one int a group), the
//   filter visits only the flagged groups (a warp a group) and flags the groups that keep a candidate, and the
//   append and select passes visit only those: a tile costs its touched documents, not SB_TILE scores.
//   Needs blockDim.x a multiple of 32.
// SB_TLIST: scoring appends the tile position of each document it makes nonzero (old score 0, new not: once
//   a document, as weights are >= 0) to a list of SB_TLCAP in shared memory (atomicAdd on its count), and the
//   filter, append and select passes visit that list instead of the SB_TILE scores (all of them when the list
//   overflowed).  Finer than SB_TOUCHED where a tile's postings are spread (a few per group of 32).
// SB_CANDLIST: the filter writes the candidates' keys to a list of SB_CAND in shared memory (and resets their
//   scores), so the append and the 8 histogram passes of the select read the list instead of rescanning the
//   tile; candidates beyond SB_CAND stay in the scores and are scanned as without the switch.
// SB_DYNAMIC: the scores in dynamic shared memory (SB_TILE * 4 bytes passed at the launch; a tile beyond the
//   48 KiB of static shared memory, with the function's max_dynamic_shared_size_bytes raised).
// The float32 sums (term order per document) and the key rule are those of the default build, and the top k
// is the k largest distinct keys whatever the tiling, so every variant returns the same (doc, score, n).
#ifndef SB_CAND
#define SB_CAND 1024
#endif
#ifndef SB_TLCAP
#define SB_TLCAP 2048
#endif
#if defined(SB_TLIST) && defined(SB_TOUCHED)
#error "SB_TLIST and SB_TOUCHED are two forms of one thing: pick one"
#endif
#if defined(SB_TLIST) && defined(SB_TILE) && SB_TILE > 65536
#error "SB_TLIST keeps positions in a tile as 16 bits: SB_TILE <= 65536"
#endif
#ifndef SB_DYNAMIC_SCORES  // the host emulation (tests/cuda_emu/search_emu.cpp) gives its own
#define SB_DYNAMIC_SCORES(name) extern __shared__ float name[]
#endif
#ifdef SB_TOUCHED
// the documents i of the tile whose group of 32 is flagged in flags: warp w takes groups w, w + warps, ...,
// lane l document 32 g + l (a header for a loop body that uses i)
#define SB_GROUP_LOOP(i, flags)                                                                          \
    for (int g_ = (int)(threadIdx.x >> 5), i = 0; g_ < ngroups; g_ += (int)(blockDim.x >> 5))           \
        if ((flags)[g_] && (i = (g_ << 5) + (int)(threadIdx.x & 31)) < width)
#define SB_TOUCHED_LOOP(i) SB_GROUP_LOOP(i, touched_sh)
#define SB_CAND_LOOP(i) SB_GROUP_LOOP(i, cand_sh)
#endif
#ifdef SB_TLIST
// the documents i of the tile's touched list (tn of them; every document of the tile if it overflowed)
#define SB_TOUCHED_LOOP(i)                                                                               \
    for (int x_ = (int)threadIdx.x, i = 0; x_ < (tn <= SB_TLCAP ? tn : width); x_ += (int)blockDim.x)     \
        if ((i = tn <= SB_TLCAP ? (int)tl_sh[x_] : x_), true)
#define SB_CAND_LOOP(i) SB_TOUCHED_LOOP(i)
#endif

template <int U>
__device__ __forceinline__ bool sb_step(const int* __restrict__ indices, const float* __restrict__ data,
                                        long long p0, long long end, int d0, int d1, float w, float* a,
                                        long long* next, int* touched = nullptr, int* nx_next = nullptr,
                                        unsigned short* tl = nullptr, int* tl_n = nullptr) {
    int doc[U];
    float wt[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const long long p = p0 + (long long)u * blockDim.x + threadIdx.x;
        doc[u] = p < end ? indices[p] : 0x7FFFFFFF;
        wt[u] = p < end ? data[p] : 0.0f;
    }
    bool all_in = true;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const long long p = p0 + (long long)u * blockDim.x + threadIdx.x;
        if (doc[u] < d1) {
            const float prod = w * wt[u];
#ifdef SB_TLIST
            const float old = a[doc[u] - d0];
            const float nw = old + prod;
            a[doc[u] - d0] = nw;
            if (old == 0.0f && nw != 0.0f) {  // the document's first nonzero: onto the list
                const int pos = atomicAdd(tl_n, 1);
                if (pos < SB_TLCAP) tl[pos] = (unsigned short)(doc[u] - d0);
            }
#else
            a[doc[u] - d0] = a[doc[u] - d0] + prod;
#endif
#ifdef SB_TOUCHED
            touched[(doc[u] - d0) >> 5] = 1;
#endif
        } else {
            all_in = false;
#ifdef SB_JUMP
            if (p == p0 || (p - 1 < end && indices[p - 1] < d1)) { *next = p; atomicMin(nx_next, doc[u]); }
#else
            if (p == p0 || (p - 1 < end && indices[p - 1] < d1)) *next = p;
#endif
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
// otherwise a radix select (8 passes of 8 bits, histograms in shared memory; keys are distinct, so exactly k
// keys are >= the k-th largest) of the kept and the candidates gives the new k kept, written to the other
// buffer (top_a / top_b of the query), and theta = the k-th largest key.  Candidates are reset to 0 as they
// are written.  At the end the kept keys (unordered) are in top_a, their number in top_n.
// Device memory: the two key buffers (k each) and a cursor per query term; the scores live in shared memory.
#ifndef SB_TILE
#define SB_TILE 8192
#endif
#ifndef SB_UNROLL
#define SB_UNROLL 4
#endif

extern "C" __global__ void bm25_block_search(const long long* __restrict__ indptr, const int* __restrict__ indices,
                                             const float* __restrict__ data, const long long* __restrict__ q_ptr,
                                             const int* __restrict__ q_terms, const float* __restrict__ q_w,
                                             int n_docs, int k, long long* cursor, unsigned long long* top_a,
                                             unsigned long long* top_b, int* top_n, int fmode,
                                             const unsigned int* __restrict__ allow_bits,
                                             const long long* __restrict__ a_ptr, const int* __restrict__ a_docs) {
    const int q = blockIdx.x;
    const long long j0 = q_ptr[q], j1 = q_ptr[q + 1];
#ifdef SB_DYNAMIC
    SB_DYNAMIC_SCORES(a);  // SB_TILE floats, the launch's dynamic shared memory
#else
    __shared__ float a[SB_TILE];
#endif
#ifdef SB_TOUCHED
    __shared__ int touched_sh[SB_TILE / 32], cand_sh[SB_TILE / 32];  // groups scored / holding a candidate
#endif
#ifdef SB_TLIST
    __shared__ unsigned short tl_sh[SB_TLCAP];  // the tile's touched documents (positions in the tile)
    __shared__ int tl_n_sh;
#endif
#ifdef SB_CANDLIST
    __shared__ unsigned long long list_sh[SB_CAND];  // the tile's first SB_CAND candidate keys
#endif
#ifdef SB_JUMP
    __shared__ int nx_sh[3];  // per tile it: slot it % 3 its first doc, (it + 1) % 3 the next's, being taken
#endif
    __shared__ unsigned int allow_sh[SB_TILE / 32];  // the tile's allowed documents (fmode 1, 2)
    __shared__ unsigned int hist[256];
    __shared__ unsigned long long prefix_sh, mask_sh;
    __shared__ long long remaining_sh, next_sh[2];
    __shared__ int cnt_sh, pos_sh;
    unsigned long long* buf[2] = {top_a + (long long)q * k, top_b + (long long)q * k};
    int cur = 0;
    int m = 0;                      // keys kept in buf[cur]
    unsigned long long theta = 0;   // a candidate's key must be > theta
    for (int i = threadIdx.x; i < SB_TILE; i += blockDim.x) a[i] = 0.0f;
#ifdef SB_TOUCHED
    for (int i = threadIdx.x; i < SB_TILE / 32; i += blockDim.x) { touched_sh[i] = 0; cand_sh[i] = 0; }
#endif
#ifdef SB_TLIST
    if (threadIdx.x == 0) tl_n_sh = 0;  // before the barrier below
#endif
#ifdef SB_JUMP
    if (threadIdx.x < 3) nx_sh[threadIdx.x] = 0x7FFFFFFF;
    __syncthreads();
    for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) {  // slot 0: the first tile's first doc
        const long long c = indptr[q_terms[j]];
        cursor[j] = c;
        if (c < indptr[q_terms[j] + 1]) atomicMin(&nx_sh[0], indices[c]);
    }
#else
    for (long long j = j0 + threadIdx.x; j < j1; j += blockDim.x) cursor[j] = indptr[q_terms[j]];
#endif
    __syncthreads();
#ifdef SB_JUMP
    int it = 0;
    for (long long d0 = 0; d0 < n_docs; d0 += SB_TILE, ++it) {
        // the smallest doc of a posting not yet consumed (taken during the previous tile's scoring, read
        // after its barriers); the slot the next tile's scoring takes was last read a tile ago, before
        // that tile's barriers, so thread 0 may reset it now
        const int nx = nx_sh[it % 3];
        if (nx == 0x7FFFFFFF) break;  // no term has a posting left: the remaining scores are all 0
        if ((long long)(nx & ~31) > d0) d0 = nx & ~31;
        if (threadIdx.x == 0) nx_sh[(it + 2) % 3] = 0x7FFFFFFF;
        int* const nx_next = &nx_sh[(it + 1) % 3];
#else
    for (long long d0 = 0; d0 < n_docs; d0 += SB_TILE) {
        int* const nx_next = nullptr;
#endif
        const int d1 = (int)(n_docs - d0 < SB_TILE ? n_docs : d0 + SB_TILE);
        const int width = d1 - (int)d0;
#ifdef SB_TOUCHED
        const int ngroups = (width + 31) >> 5;
        int* const touched = touched_sh;
#else
        int* const touched = nullptr;
#endif
#ifdef SB_TLIST
        unsigned short* const tl = tl_sh;
        int* const tl_n = &tl_n_sh;
#else
        unsigned short* const tl = nullptr;
        int* const tl_n = nullptr;
#endif
        // (1) score the tile: a term's postings in steps of blockDim.x (the first) then SB_UNROLL * blockDim.x
        for (long long j = j0; j < j1; ++j) {
            const int t = q_terms[j];
            const float w = q_w[j];
            const long long end = indptr[t + 1];
            long long p0 = cursor[j];
            bool first = true;  // most terms have fewer postings in a tile than a block has threads
            while (true) {
                const bool all_in = first ? sb_step<1>(indices, data, p0, end, (int)d0, d1, w, a, &next_sh[j & 1],
                                                       touched, nx_next, tl, tl_n)
                                          : sb_step<SB_UNROLL>(indices, data, p0, end, (int)d0, d1, w, a, &next_sh[j & 1],
                                                               touched, nx_next, tl, tl_n);
                if (!__syncthreads_and(all_in)) break;  // also the barrier between terms
                p0 += first ? (long long)blockDim.x : (long long)SB_UNROLL * blockDim.x;
                first = false;
            }
            if (threadIdx.x == 0) cursor[j] = next_sh[j & 1];
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
        int mine = 0;
#ifdef SB_TLIST
        const int tn = tl_n_sh;  // complete: the scoring's last barrier, or the one above (no term)
#endif
#if defined(SB_TOUCHED) || defined(SB_TLIST) || defined(SB_CANDLIST)
#if defined(SB_TOUCHED) || defined(SB_TLIST)
        SB_TOUCHED_LOOP(i) {  // the documents scored in this tile (the others are all 0)
#else
        for (int i = threadIdx.x; i < width; i += blockDim.x) {
#endif
            const float s = a[i];
            const unsigned long long key = sb_key(s, d0 + i);
            if (s > 0.0f && (fmode == 0 || ((allow_sh[i >> 5] >> (i & 31)) & 1u)) && key > theta) {
#ifdef SB_TOUCHED
                cand_sh[i >> 5] = 1;
#endif
#ifdef SB_CANDLIST
                const int pos = atomicAdd(&cnt_sh, 1);
                if (pos < SB_CAND) { list_sh[pos] = key; a[i] = 0.0f; }  // beyond the list: stays in a
#else
                ++mine;
#endif
            } else a[i] = 0.0f;
        }
#else
        for (int i = threadIdx.x; i < width; i += blockDim.x) {
            const float s = a[i];
            if (s > 0.0f && (fmode == 0 || ((allow_sh[i >> 5] >> (i & 31)) & 1u)) && sb_key(s, d0 + i) > theta) ++mine;
            else a[i] = 0.0f;
        }
#endif
        if (mine) atomicAdd(&cnt_sh, mine);
        __syncthreads();
        const int cnt = cnt_sh;
#ifdef SB_TOUCHED
        for (int g = threadIdx.x; g < ngroups; g += blockDim.x) touched_sh[g] = 0;  // all have read them (barrier)
#endif
#ifdef SB_TLIST
        if (threadIdx.x == 0) tl_n_sh = 0;  // all have read it (barrier); the list itself is read until the tile ends
#endif
        __syncthreads();  // cnt_sh is read by all before it is reset
        if (cnt == 0) continue;  // every thread sees the same cnt
#ifdef SB_CANDLIST
        const int nl = cnt < SB_CAND ? cnt : SB_CAND;  // candidates in list_sh; the rest (cnt > SB_CAND) in a
#endif
        unsigned long long* kept = buf[cur];
        if ((long long)m + cnt < k) {  // (3a) append
#ifdef SB_CANDLIST
            if (threadIdx.x == 0) pos_sh = m + nl;
            for (int i = threadIdx.x; i < nl; i += blockDim.x) kept[m + i] = list_sh[i];
#else
            if (threadIdx.x == 0) pos_sh = m;
#endif
            __syncthreads();
#ifdef SB_CANDLIST
            if (cnt > SB_CAND)
#endif
#if defined(SB_TOUCHED) || defined(SB_TLIST)
            SB_CAND_LOOP(i) {
#else
            for (int i = threadIdx.x; i < width; i += blockDim.x) {
#endif
                const float s = a[i];
                if (s > 0.0f) {
                    kept[atomicAdd(&pos_sh, 1)] = sb_key(s, d0 + i);
                    a[i] = 0.0f;
                }
            }
            m += cnt;
            __syncthreads();
#ifdef SB_TOUCHED
            for (int g = threadIdx.x; g < ngroups; g += blockDim.x) cand_sh[g] = 0;  // read by all (barrier)
#endif
            continue;
        }
        // (3b) radix select of the k largest among kept[0, m) and the tile's candidates
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
#ifdef SB_CANDLIST
            for (int i = threadIdx.x; i < nl; i += blockDim.x) {
                const unsigned long long key = list_sh[i];
                if ((key & mask) == prefix) atomicAdd(&hist[(unsigned int)(key >> shift) & 255u], 1u);
            }
            if (cnt > SB_CAND)
#endif
#if defined(SB_TOUCHED) || defined(SB_TLIST)
            SB_CAND_LOOP(i) {
#else
            for (int i = threadIdx.x; i < width; i += blockDim.x) {
#endif
                const float s = a[i];
                if (s > 0.0f) {
                    const unsigned long long key = sb_key(s, d0 + i);
                    if ((key & mask) == prefix) atomicAdd(&hist[(unsigned int)(key >> shift) & 255u], 1u);
                }
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
                pos_sh = 0;
            }
            __syncthreads();
        }
        const unsigned long long kth = prefix_sh;  // the k-th largest key itself (distinct keys, all 64 bits)
        unsigned long long* next = buf[1 - cur];
        for (int i = threadIdx.x; i < m; i += blockDim.x) {
            const unsigned long long key = kept[i];
            if (key >= kth) next[atomicAdd(&pos_sh, 1)] = key;
        }
#ifdef SB_CANDLIST
        for (int i = threadIdx.x; i < nl; i += blockDim.x) {
            const unsigned long long key = list_sh[i];
            if (key >= kth) next[atomicAdd(&pos_sh, 1)] = key;
        }
        if (cnt > SB_CAND)
#endif
#if defined(SB_TOUCHED) || defined(SB_TLIST)
        SB_CAND_LOOP(i) {
#else
        for (int i = threadIdx.x; i < width; i += blockDim.x) {
#endif
            const float s = a[i];
            if (s > 0.0f) {
                const unsigned long long key = sb_key(s, d0 + i);
                if (key >= kth) next[atomicAdd(&pos_sh, 1)] = key;
                a[i] = 0.0f;
            }
        }
        cur = 1 - cur;
        m = k;
        theta = kth;
        __syncthreads();
#ifdef SB_TOUCHED
        for (int g = threadIdx.x; g < ngroups; g += blockDim.x) cand_sh[g] = 0;  // read by all (barrier above)
#endif
    }
    if (cur == 1)  // the kept keys end in top_a
        for (int i = threadIdx.x; i < m; i += blockDim.x) buf[0][i] = buf[1][i];
    if (threadIdx.x == 0) top_n[q] = m;
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
