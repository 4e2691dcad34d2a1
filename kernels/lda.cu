// LDA collapsed Gibbs sampling kernels (EZLDA, Eq. 1-10; Moon et al. Alg. 2).
//
// Every kernel mirrors a numba CPU twin in kernels/lda.py operation for operation: the same
// loops in the same order, the same dtypes (float32 tables, float64 accumulators), compiled
// with --fmad=false so that no multiply-add is contracted.  Random numbers come from the
// counter-based generator lda_uniform(seed, iteration, token key), so a kernel and its twin
// make the same draws.

typedef unsigned long long u64;

__device__ __forceinline__ u64 lda_splitmix(u64 x) {
    x = x + 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}

__device__ __forceinline__ double lda_uniform(u64 seed, u64 it, u64 key) {
    u64 h = lda_splitmix(lda_splitmix(lda_splitmix(seed) ^ it) ^ key);
    return (double)(h >> 11) * 1.1102230246251565404236316680908203125e-16;  // 2^-53
}

// count of topic k in the sorted D row [base, base+nnz); 0 when absent (binary search)
__device__ __forceinline__ int lda_find(const int* d_topic, const int* d_cnt, long long base, int nnz, int k) {
    int lo = 0, hi = nnz;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (d_topic[base + mid] < k) lo = mid + 1; else hi = mid;
    }
    if (lo < nnz && d_topic[base + lo] == k) return d_cnt[base + lo];
    return 0;
}

extern "C" __global__ void lda_uniform_kernel(u64 seed, u64 it, const long long* keys, long long n, double* out) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[i] = lda_uniform(seed, it, (u64)keys[i]);
}

// topic initialisation: z = floor(u * K), iteration 0
extern "C" __global__ void lda_init_topics(u64 seed, const long long* keys, long long n, int K, int* z) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double u = lda_uniform(seed, 0ULL, (u64)keys[i]);
    int k = (int)(u * (double)K);
    if (k >= K) k = K - 1;
    z[i] = k;
}

// W[v][k] += 1 for every token (integer atomics: exact, order-free)
extern "C" __global__ void lda_rebuild_w(const int* word, const int* z, long long n, int K, int* W) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    atomicAdd(&W[(long long)word[i] * K + z[i]], 1);
}

// D row of every document from its topics sorted within the document (keys = doc * K + z sorted):
// run-length encoding into the padded CSR at doc_ptr[d] (capacity = document length)
extern "C" __global__ void lda_rebuild_d(const long long* doc_ptr, const long long* sorted_keys, int n_docs, int K,
                                         int* d_topic, int* d_cnt, int* d_nnz) {
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= n_docs) return;
    long long b = doc_ptr[d], e = doc_ptr[d + 1];
    int nnz = 0;
    long long i = b;
    while (i < e) {
        int k = (int)(sorted_keys[i] - (long long)d * K);
        int c = 0;
        while (i < e && (int)(sorted_keys[i] - (long long)d * K) == k) { c += 1; i += 1; }
        d_topic[b + nnz] = k;
        d_cnt[b + nnz] = c;
        nnz += 1;
    }
    d_nnz[d] = nnz;
}

// The same D rows from a per-document histogram in shared memory (K + blockDim.x ints), one block per
// document: token topics (gathered through the inverted index doc_tok) counted with shared atomics,
// then the nonzero bins written in topic order (each thread a contiguous range of bins, offsets from
// a scan by thread 0).  Equal to lda_rebuild_d's rows: topics ascending, counts > 0.
extern "C" __global__ void lda_rebuild_d_hist(const long long* doc_ptr, const long long* doc_tok, const int* z,
                                              int n_docs, int K, int* d_topic, int* d_cnt, int* d_nnz) {
    extern __shared__ int sW[];
    int* hist = sW;
    int* part = sW + K;
    const int d = blockIdx.x;
    if (d >= n_docs) return;
    const long long b = doc_ptr[d], e = doc_ptr[d + 1];
    for (int k = threadIdx.x; k < K; k += blockDim.x) hist[k] = 0;
    __syncthreads();
    for (long long i = b + threadIdx.x; i < e; i += blockDim.x) atomicAdd(&hist[z[doc_tok[i]]], 1);
    __syncthreads();
    const int per = (K + blockDim.x - 1) / blockDim.x;
    const int k0 = threadIdx.x * per;
    const int k1 = k0 + per < K ? k0 + per : K;
    int c = 0;
    for (int k = k0; k < k1; k++) c += hist[k] != 0;
    part[threadIdx.x] = c;
    __syncthreads();
    if (threadIdx.x == 0) {
        int acc = 0;
        for (int i = 0; i < (int)blockDim.x; i++) { int x = part[i]; part[i] = acc; acc += x; }
        d_nnz[d] = acc;
    }
    __syncthreads();
    int o = part[threadIdx.x];
    for (int k = k0; k < k1; k++) {
        int h = hist[k];
        if (h) { d_topic[b + o] = k; d_cnt[b + o] = h; o++; }
    }
}

// Per word: What[v][k] = (W[v][k] + beta) / (n_k + V beta) rounded to float (Eq. 1 part 2),
// running sums qcum (float, rounded from a double accumulator) and qtot (double), and the top-3
// topics of What[v] (first index wins ties) for three-branch sampling (Eq. 7).
extern "C" __global__ void lda_prepare_words(const int* W, const long long* nk, int V, int K, double beta,
                                             double vbeta, float* what, float* qcum, double* qtot,
                                             int* top, float* topv) {
    int v = blockIdx.x * blockDim.x + threadIdx.x;
    if (v >= V) return;
    long long row = (long long)v * K;
    double acc = 0.0;
    float t1 = -1.0f, t2 = -1.0f, t3 = -1.0f;
    int k1 = -1, k2 = -1, k3 = -1;
    for (int k = 0; k < K; k++) {
        double num = (double)W[row + k] + beta;
        double den = (double)nk[k] + vbeta;
        float w = (float)(num / den);
        what[row + k] = w;
        acc = acc + (double)w;
        qcum[row + k] = (float)acc;
        if (w > t1) { t3 = t2; k3 = k2; t2 = t1; k2 = k1; t1 = w; k1 = k; }
        else if (w > t2) { t3 = t2; k3 = k2; t2 = w; k2 = k; }
        else if (w > t3) { t3 = w; k3 = k; }
    }
    qtot[v] = acc;
    top[2 * v] = k1;
    top[2 * v + 1] = k2;
    topv[3 * v] = t1;
    topv[3 * v + 1] = k2 >= 0 ? t2 : 0.0f;
    topv[3 * v + 2] = k3 >= 0 ? t3 : 0.0f;
}

#define LDA_FULL 0xffffffffu

// Positions of NT topics (t[i] < 0: none) in the sorted D row [base, base+nnz), searched by the
// whole warp at once: 32 pivots a step (one load per lane per topic, a ballot picks the segment), then
// the last segment of <= 32 entries compared lane by lane.  -1 where absent.  Warp-uniform result.
template <int NT>
__device__ __forceinline__ void lda_warp_pos(const int* d_topic, long long base, int nnz, const int* t,
                                             int lane, int* out) {
    int lo[NT], len[NT];
#pragma unroll
    for (int i = 0; i < NT; i++) { lo[i] = 0; len[i] = t[i] >= 0 ? nnz : 0; out[i] = -1; }
    int mx = nnz;
    while (mx > 32) {
        int piv[NT];
        int stride[NT];
#pragma unroll
        for (int i = 0; i < NT; i++) {
            stride[i] = (len[i] + 31) >> 5;
            int idx = lo[i] + lane * stride[i];
            piv[i] = (len[i] > 32 && idx < lo[i] + len[i]) ? d_topic[base + idx] : 0x7fffffff;
        }
        mx = 0;
#pragma unroll
        for (int i = 0; i < NT; i++) {
            unsigned m = __ballot_sync(LDA_FULL, piv[i] <= t[i]);
            if (len[i] > 32) {
                if (!m) { len[i] = 0; }
                else {
                    int h = 31 - __clz(m);
                    int nlo = lo[i] + h * stride[i];
                    int end = lo[i] + len[i];
                    lo[i] = nlo;
                    len[i] = (nlo + stride[i] < end ? nlo + stride[i] : end) - nlo;
                }
            }
            mx = len[i] > mx ? len[i] : mx;
        }
    }
    int e[NT];
#pragma unroll
    for (int i = 0; i < NT; i++) e[i] = lane < len[i] ? d_topic[base + lo[i] + lane] : -1;
#pragma unroll
    for (int i = 0; i < NT; i++) {
        unsigned m = __ballot_sync(LDA_FULL, len[i] > 0 && e[i] == t[i]);
        out[i] = m ? lo[i] + __ffs(m) - 1 : -1;
    }
}

// inclusive Kogge-Stone scan over the 32 lanes (lane l receives old[l - off] + old[l] for off = 1..16)
__device__ __forceinline__ double lda_warp_scan(double x, int lane) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        double y = __shfl_up_sync(LDA_FULL, x, off);
        if (lane >= off) x = y + x;
    }
    return x;
}

// One Gibbs draw per token against the counts of the previous pass (EZLDA Eq. 3-4 and, with
// three != 0, Eq. 6-10 with g = 2); one WARP samples 32 consecutive tokens, one after another.  With
// exclude != 0 the token's own assignment is taken out of its counts (collapsed Gibbs, Moon et al.
// Eq. 1): D[d][z]-1 always, and W[v][z]-w_self, n_z-w_self (w_self = 1 while training, 0 for
// inference with W fixed).
//
// S' = sum over the nonzeros j of D[d] (topics other than K1 and the own topic zs) of
// cnt_j * What[v][topic_j], defined lane-major: lane l sums the entries j = l, l+32, ... in order
// (float64), K1 adding 0; the own topic's entry value is then subtracted from its lane's sum; an
// inclusive Kogge-Stone scan of the 32 lane sums gives S' (lane 31) and the lane offsets.  The S
// branch takes the first lane Ls whose inclusive sum exceeds the target and whose own sum is positive
// (else the last lane with a positive sum), then walks that lane's entries in rounds of 32: values
// (0 for K1 and zs) are scanned across the warp (Kogge-Stone), added to a carry that starts at the
// lane's exclusive offset, and the first entry with a positive value whose carry + prefix exceeds the
// target is drawn (else the last positive entry of the lane).  The lane sums depend on the word and
// the document only, so consecutive tokens of the same (word, document) share them (tokens are sorted
// by word and document inside a chunk).  The numba twin kernels/lda.py::_sample_one performs the same
// float operations in the same order, so draws are equal token for token.
// Launch: blocks of 256 threads (8 warps); warp w samples tokens [32 w, 32 w + 32); lane i holds token
// 32 w + i (its data, its uniform number, its result), so loads and stores of token arrays coalesce.
// flags: 0 = S or Q branch, 1 = max-topic branch after building S', 2 = skipped (decided by the
// S_est bound before S' is built), 3 = own-topic branch.
#ifndef LDA_SAMPLE_MINB
#define LDA_SAMPLE_MINB 4  // blocks of 256 resident per SM: caps registers at 64 (measured: 8 bytes of spill)
#endif
#ifndef LDA_UNROLL
#define LDA_UNROLL 4       // D-row entries per lane loaded together in the lane sums
#endif
extern "C" __global__ void __launch_bounds__(256, LDA_SAMPLE_MINB) lda_sample(
        long long n, const int* word, const int* doc, const long long* keys, const int* z,
        const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
        const int* W, const long long* nk, const float* what, const float* qcum, const double* qtot,
        const int* top, const float* topv, int K, double alpha, double beta, double vbeta,
        double w_self, u64 seed, u64 it, int three, int exclude, int* z_out, signed char* flags) {
    const int lane = threadIdx.x & 31;
    const long long t0 = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) << 5;
    if (t0 >= n) return;
    const int cnt = n - t0 < 32 ? (int)(n - t0) : 32;
    // lane i loads token t0 + i
    int my_v = 0, my_d = 0, my_z = 0, my_nnz = 0, my_L = 0, my_k1 = -1, my_k2 = -1;
    long long my_base = 0;
    double my_u = 0.0;
    if (lane < cnt) {
        long long t = t0 + lane;
        my_v = word[t];
        my_d = doc[t];
        my_z = z[t];
        my_u = lda_uniform(seed, it, (u64)keys[t]);
        my_base = doc_ptr[my_d];
        my_L = (int)(doc_ptr[my_d + 1] - my_base);
        my_nnz = d_nnz[my_d];
        if (three) { my_k1 = top[2 * my_v]; my_k2 = top[2 * my_v + 1]; }
    }
    int res_z = 0;
    signed char res_f = 0;
    int pv = -1, pd = -1;
    double A = 0.0;  // this lane's sum of cnt_j * What[v][topic_j], j = lane (mod 32), topic != K1
    for (int i = 0; i < cnt; i++) {
        const int v = __shfl_sync(LDA_FULL, my_v, i);
        const int d = __shfl_sync(LDA_FULL, my_d, i);
        const int zo = __shfl_sync(LDA_FULL, my_z, i);
        const long long base = __shfl_sync(LDA_FULL, my_base, i);
        const int L = __shfl_sync(LDA_FULL, my_L, i);
        const int nnz = __shfl_sync(LDA_FULL, my_nnz, i);
        const double u = __shfl_sync(LDA_FULL, my_u, i);
        const int K1 = __shfl_sync(LDA_FULL, my_k1, i);
        const int K2 = __shfl_sync(LDA_FULL, my_k2, i);
        const long long row = (long long)v * K;
        const int zs = (exclude && zo != K1) ? zo : -1;
        int p1 = -1, p2 = -1, pz = -1;
        if (three) {  // K1, K2 and the own topic, searched together
            int want[3] = {K1, K2, zs};
            int pos[3];
            lda_warp_pos<3>(d_topic, base, nnz, want, lane, pos);
            p1 = pos[0];
            p2 = pos[1];
            pz = pos[2];
        } else if (zs >= 0) {
            lda_warp_pos<1>(d_topic, base, nnz, &zs, lane, &pz);
        }
        int pick = -1;
        signed char flag = 0;
        double a1d = 0.0;
        double M = 0.0;
        if (three) {
            const int b1 = p1 >= 0 ? d_cnt[base + p1] : 0;
            a1d = (double)topv[3 * v];
            if (exclude && zo == K1) {
                double wadj = ((double)W[row + K1] - w_self + beta) / ((double)nk[K1] - w_self + vbeta);
                M = ((double)b1 - 1.0 + alpha) * wadj;
            } else {
                M = ((double)b1 + alpha) * a1d;
            }
            // skip test with S_est (Eq. 10, g = 2) and Q' = alpha (sum What[v] - a1)
            const int b2 = p2 >= 0 ? d_cnt[base + p2] : 0;
            double a2d = (double)topv[3 * v + 1];
            double a3d = (double)topv[3 * v + 2];
            double rest = (double)(L - b1 - b2);
            double sest = a2d * (double)b2 + a3d * rest;
            double qb = alpha * (qtot[v] - a1d);
            double tt = M + sest;
            tt = tt + qb;
            if (u * tt < M) { pick = K1; flag = 2; }
        }
        if (pick < 0) {
            double zw = 0.0, wzs = 0.0, szs = 0.0;
            if (zs >= 0) {
                const int dz = pz >= 0 ? d_cnt[base + pz] : 0;
                double wadj = ((double)W[row + zs] - w_self + beta) / ((double)nk[zs] - w_self + vbeta);
                zw = ((double)dz - 1.0 + alpha) * wadj;
                wzs = (double)what[row + zs];
                szs = (double)dz * wzs;
            }
            if (v != pv || d != pd) {
                A = 0.0;
                for (int j = lane; j < nnz; j += 32 * LDA_UNROLL) {
                    int k[LDA_UNROLL], c[LDA_UNROLL];
#pragma unroll
                    for (int r = 0; r < LDA_UNROLL; r++) {
                        const int jj = j + 32 * r;
                        k[r] = jj < nnz ? d_topic[base + jj] : K1;
                        c[r] = jj < nnz ? d_cnt[base + jj] : 0;
                    }
                    double w4[LDA_UNROLL];
#pragma unroll
                    for (int r = 0; r < LDA_UNROLL; r++) w4[r] = (k[r] == K1) ? 0.0 : (double)what[row + k[r]];
#pragma unroll
                    for (int r = 0; r < LDA_UNROLL; r++) A = A + (double)c[r] * w4[r];
                }
                pv = v;
                pd = d;
            }
            double a = A;
            if (pz >= 0 && (pz & 31) == lane) a = a - szs;
            const double incl = lda_warp_scan(a, lane);
            const double s = __shfl_sync(LDA_FULL, incl, 31);
            double excl = __shfl_up_sync(LDA_FULL, incl, 1);
            double q = qtot[v];
            if (K1 >= 0) q = q - a1d;
            if (zs >= 0) q = q - wzs;
            double Q = alpha * q;
            double tot = M + zw;
            tot = tot + s;
            tot = tot + Q;
            double x = u * tot;
            if (x < M) { pick = K1; flag = 1; }
            else {
                x = x - M;
                if (x < zw) { pick = zs; flag = 3; }
                else {
                    x = x - zw;
                    if (x < s) {
                        unsigned m = __ballot_sync(LDA_FULL, incl > x && a > 0.0);
                        const int Ls = m ? __ffs(m) - 1 : 31 - __clz(__ballot_sync(LDA_FULL, a > 0.0));
                        double carry = __shfl_sync(LDA_FULL, excl, Ls);
                        if (Ls == 0) carry = 0.0;
                        int last = -1;
                        for (int j0 = Ls; j0 < nnz && pick < 0; j0 += 32 * 32) {
                            const int j = j0 + 32 * lane;
                            int k = -1;
                            double val = 0.0;
                            if (j < nnz) {
                                k = d_topic[base + j];
                                if (k != K1 && k != zs) val = (double)d_cnt[base + j] * (double)what[row + k];
                            }
                            const double P = lda_warp_scan(val, lane);
                            const unsigned hit = __ballot_sync(LDA_FULL, val > 0.0 && carry + P > x);
                            if (hit) pick = __shfl_sync(LDA_FULL, k, __ffs(hit) - 1);
                            const unsigned pos_m = __ballot_sync(LDA_FULL, val > 0.0);
                            if (pos_m) last = __shfl_sync(LDA_FULL, k, 31 - __clz(pos_m));
                            carry = carry + __shfl_sync(LDA_FULL, P, 31);
                        }
                        if (pick < 0) pick = last;
                    } else {
                        double y = x - s;
                        int lo = 0, hi = K - 1;
                        while (lo < hi) {
                            int mid = (lo + hi) >> 1;
                            double c = (double)qcum[row + mid];
                            if (K1 >= 0 && mid >= K1) c = c - a1d;
                            if (zs >= 0 && mid >= zs) c = c - wzs;
                            if (alpha * c > y) hi = mid; else lo = mid + 1;
                        }
                        pick = lo;
                    }
                }
            }
        }
        if (lane == i) { res_z = pick; res_f = flag; }
    }
    if (lane < cnt) {
        z_out[t0 + lane] = res_z;
        flags[t0 + lane] = res_f;
    }
}

// lda_sample with the tokens taken in DOCUMENT-major order (the same draws, EZLDA Eq. 3-4 and, with
// three != 0, Eq. 6-10 with g = 2; collapsed-Gibbs exclusion of Moon et al. Eq. 1): every draw depends on
// the previous pass's counts and the token's own uniform number (keyed by the token's key, not its
// position) only, so the order in which a pass visits tokens is free.  Warp w takes the doc-major
// positions [32 w, 32 w + 32): lane i samples token tok[32 w + i] (tok = the inverted index doc_tok), so
// the 32 tokens of a warp belong to one or a few documents.  When a document starts, the warp copies its
// D row (d_topic, d_cnt; nnz <= cap entries) into its slice of shared memory (2 cap ints a warp), and the
// warp search of K1 / K2 / the own topic, the counts b1 / b2 / dz, the lane sums' topics and counts and
// the S walk read it there; the lane sums then make only the What[v][topic] gathers in global memory
// (LDA_DOC_UNROLL of them in flight a lane).  A document with nnz > cap is read from global memory
// through the same code (a pointer to its row instead of the shared copy).  The per-token values that
// depend on the token alone (What row tops and qtot for three-branch, W[v][z], n_z and What[v][z] for the
// own-topic terms) are loaded by the token's lane before the loop, so a token's chain of dependent
// global loads is the lane-sum gathers, the walk's gathers and (Q branch only) the qcum search.
// Every float operation is lda_sample's, in the same order (the lane-major S', the Kogge-Stone scans,
// the branch tests; the own-topic weight wadj is computed by the token's lane before the loop, the same
// expression): the numba twin kernels/lda.py::_twin_sample gives the same z and flags token for token.
// Launch: blocks of 256 threads, dynamic shared memory 8 * 2 * cap ints; z_out / flags are written at the
// tokens' own (word-major) positions.
#ifndef LDA_DOC_MINB
#define LDA_DOC_MINB 4     // blocks of 256 resident per SM (64 registers)
#endif
#ifndef LDA_DOC_UNROLL
#define LDA_DOC_UNROLL 4   // What gathers per lane in flight in the lane sums (4 and 8: equal at K=1000, 4 faster at K=128)
#endif
extern "C" __global__ void __launch_bounds__(256, LDA_DOC_MINB) lda_sample_doc(
        long long n, const long long* tok, const int* word, const int* doc, const long long* keys, const int* z,
        const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
        const int* W, const long long* nk, const float* what, const float* qcum, const double* qtot,
        const int* top, const float* topv, int K, double alpha, double beta, double vbeta,
        double w_self, u64 seed, u64 it, int three, int exclude, int cap, int* z_out, signed char* flags) {
    extern __shared__ int sW[];
    const int lane = threadIdx.x & 31;
    const long long p0 = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) << 5;
    if (p0 >= n) return;
    int* s_topic = sW + (threadIdx.x >> 5) * 2 * cap;
    int* s_cnt = s_topic + cap;
    const int cnt = n - p0 < 32 ? (int)(n - p0) : 32;
    // lane i loads token tok[p0 + i] and the values of its word and own topic
    // (the token index, the document's offsets, length and nnz are not kept per lane: fewer registers)
    int my_v = 0, my_d = 0, my_z = 0, my_k1 = -1, my_k2 = -1;
    double my_u = 0.0, my_wadj = 0.0, my_qt = 0.0;
    float my_wz = 0.0f, my_a1 = 0.0f, my_a2 = 0.0f, my_a3 = 0.0f;
    if (lane < cnt) {
        const long long t = tok[p0 + lane];
        my_v = word[t];
        my_d = doc[t];
        my_z = z[t];
        my_u = lda_uniform(seed, it, (u64)keys[t]);
        const long long row = (long long)my_v * K;
        my_qt = qtot[my_v];
        if (three) {
            my_k1 = top[2 * my_v];
            my_k2 = top[2 * my_v + 1];
            my_a1 = topv[3 * my_v];
            my_a2 = topv[3 * my_v + 1];
            my_a3 = topv[3 * my_v + 2];
        }
        if (exclude) {  // the own topic's weight with the token taken out (lda_sample's wadj for zs, or K1 = zo)
            my_wadj = ((double)W[row + my_z] - w_self + beta) / ((double)nk[my_z] - w_self + vbeta);
            my_wz = what[row + my_z];
        }
    }
    int res_z = 0;
    signed char res_f = 0;
    int pv = -1, pd = -1, cur_d = -1, cur_L = 0, cur_nnz = 0;
    const int* dt = d_topic;  // the current document's D row: the shared copy or its global row
    const int* dc = d_cnt;
    double A = 0.0;  // this lane's sum of cnt_j * What[v][topic_j], j = lane (mod 32), topic != K1
    for (int i = 0; i < cnt; i++) {
        const int v = __shfl_sync(LDA_FULL, my_v, i);
        const int d = __shfl_sync(LDA_FULL, my_d, i);
        const int zo = __shfl_sync(LDA_FULL, my_z, i);
        const double u = __shfl_sync(LDA_FULL, my_u, i);
        const int K1 = __shfl_sync(LDA_FULL, my_k1, i);
        const int K2 = __shfl_sync(LDA_FULL, my_k2, i);
        const double wadj = __shfl_sync(LDA_FULL, my_wadj, i);
        const float wzf = __shfl_sync(LDA_FULL, my_wz, i);
        const long long row = (long long)v * K;
        if (d != cur_d) {  // a new document: its D row into this warp's shared memory when it fits
            const long long base = doc_ptr[d];  // warp-uniform loads, once per document run
            cur_L = (int)(doc_ptr[d + 1] - base);
            cur_nnz = d_nnz[d];
            const int nnz = cur_nnz;
            __syncwarp();  // every lane is done with the previous row
            if (nnz <= cap) {
                for (int j = lane; j < nnz; j += 32) {
                    s_topic[j] = d_topic[base + j];
                    s_cnt[j] = d_cnt[base + j];
                }
                __syncwarp();
                dt = s_topic;
                dc = s_cnt;
            } else {
                dt = d_topic + base;
                dc = d_cnt + base;
            }
            cur_d = d;
        }
        const int L = cur_L;
        const int nnz = cur_nnz;
        const int zs = (exclude && zo != K1) ? zo : -1;
        int p1 = -1, p2 = -1, pz = -1;
        if (three) {  // K1, K2 and the own topic, searched together
            int want[3] = {K1, K2, zs};
            int pos[3];
            lda_warp_pos<3>(dt, 0, nnz, want, lane, pos);
            p1 = pos[0];
            p2 = pos[1];
            pz = pos[2];
        } else if (zs >= 0) {
            lda_warp_pos<1>(dt, 0, nnz, &zs, lane, &pz);
        }
        int pick = -1;
        signed char flag = 0;
        double a1d = 0.0;
        double M = 0.0;
        if (three) {
            const int b1 = p1 >= 0 ? dc[p1] : 0;
            a1d = (double)__shfl_sync(LDA_FULL, my_a1, i);
            if (exclude && zo == K1) {
                M = ((double)b1 - 1.0 + alpha) * wadj;
            } else {
                M = ((double)b1 + alpha) * a1d;
            }
            // skip test with S_est (Eq. 10, g = 2) and Q' = alpha (sum What[v] - a1)
            const int b2 = p2 >= 0 ? dc[p2] : 0;
            double a2d = (double)__shfl_sync(LDA_FULL, my_a2, i);
            double a3d = (double)__shfl_sync(LDA_FULL, my_a3, i);
            double rest = (double)(L - b1 - b2);
            double sest = a2d * (double)b2 + a3d * rest;
            double qb = alpha * (__shfl_sync(LDA_FULL, my_qt, i) - a1d);
            double tt = M + sest;
            tt = tt + qb;
            if (u * tt < M) { pick = K1; flag = 2; }
        }
        if (pick < 0) {
            double zw = 0.0, wzs = 0.0, szs = 0.0;
            if (zs >= 0) {
                const int dz = pz >= 0 ? dc[pz] : 0;
                zw = ((double)dz - 1.0 + alpha) * wadj;
                wzs = (double)wzf;
                szs = (double)dz * wzs;
            }
            if (v != pv || d != pd) {
                A = 0.0;
                for (int j = lane; j < nnz; j += 32 * LDA_DOC_UNROLL) {
                    float w[LDA_DOC_UNROLL];
#pragma unroll
                    for (int r = 0; r < LDA_DOC_UNROLL; r++) {
                        const int jj = j + 32 * r;
                        const int k = jj < nnz ? dt[jj] : K1;
                        w[r] = (jj >= nnz || k == K1) ? 0.0f : what[row + k];
                    }
#pragma unroll
                    for (int r = 0; r < LDA_DOC_UNROLL; r++) {
                        const int jj = j + 32 * r;
                        const int c = jj < nnz ? dc[jj] : 0;
                        A = A + (double)c * (double)w[r];
                    }
                }
                pv = v;
                pd = d;
            }
            double a = A;
            if (pz >= 0 && (pz & 31) == lane) a = a - szs;
            const double incl = lda_warp_scan(a, lane);
            const double s = __shfl_sync(LDA_FULL, incl, 31);
            double excl = __shfl_up_sync(LDA_FULL, incl, 1);
            double q = __shfl_sync(LDA_FULL, my_qt, i);
            if (K1 >= 0) q = q - a1d;
            if (zs >= 0) q = q - wzs;
            double Q = alpha * q;
            double tot = M + zw;
            tot = tot + s;
            tot = tot + Q;
            double x = u * tot;
            if (x < M) { pick = K1; flag = 1; }
            else {
                x = x - M;
                if (x < zw) { pick = zs; flag = 3; }
                else {
                    x = x - zw;
                    if (x < s) {
                        unsigned m = __ballot_sync(LDA_FULL, incl > x && a > 0.0);
                        const int Ls = m ? __ffs(m) - 1 : 31 - __clz(__ballot_sync(LDA_FULL, a > 0.0));
                        double carry = __shfl_sync(LDA_FULL, excl, Ls);
                        if (Ls == 0) carry = 0.0;
                        int last = -1;
                        for (int j0 = Ls; j0 < nnz && pick < 0; j0 += 32 * 32) {
                            const int j = j0 + 32 * lane;
                            int k = -1;
                            double val = 0.0;
                            if (j < nnz) {
                                k = dt[j];
                                if (k != K1 && k != zs) val = (double)dc[j] * (double)what[row + k];
                            }
                            const double P = lda_warp_scan(val, lane);
                            const unsigned hit = __ballot_sync(LDA_FULL, val > 0.0 && carry + P > x);
                            if (hit) pick = __shfl_sync(LDA_FULL, k, __ffs(hit) - 1);
                            const unsigned pos_m = __ballot_sync(LDA_FULL, val > 0.0);
                            if (pos_m) last = __shfl_sync(LDA_FULL, k, 31 - __clz(pos_m));
                            carry = carry + __shfl_sync(LDA_FULL, P, 31);
                        }
                        if (pick < 0) pick = last;
                    } else {
                        double y = x - s;
                        int lo = 0, hi = K - 1;
                        while (lo < hi) {
                            int mid = (lo + hi) >> 1;
                            double c = (double)qcum[row + mid];
                            if (K1 >= 0 && mid >= K1) c = c - a1d;
                            if (zs >= 0 && mid >= zs) c = c - wzs;
                            if (alpha * c > y) hi = mid; else lo = mid + 1;
                        }
                        pick = lo;
                    }
                }
            }
        }
        if (lane == i) { res_z = pick; res_f = flag; }
    }
    if (lane < cnt) {
        const long long t = tok[p0 + lane];
        z_out[t] = res_z;
        flags[t] = res_f;
    }
}

// Moon et al. (Alg. 2, 4) dense sampler for small K: DNT[d][k] = (D[d][k] - own + alpha) / (n_k - own + V beta)
// precomputed per document (own topic adjusted in the token's loop), W rows of a column panel of
// words staged in shared memory (one block per panel of PANEL words; tokens sorted by word).
// Sampling: p_k = (W[v][k] - own + beta) * DNT[d][k]; sum, draw, rescan (Alg. 2 lines 21-32).
extern "C" __global__ void lda_dense_dnt(const long long* doc_ptr, const int* d_topic, const int* d_cnt,
                                         const int* d_nnz, const long long* nk, int n_docs, int K,
                                         double alpha, double vbeta, float* dnt) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (long long)n_docs * K) return;
    int d = (int)(i / K);
    int k = (int)(i - (long long)d * K);
    int c = lda_find(d_topic, d_cnt, doc_ptr[d], d_nnz[d], k);
    dnt[i] = (float)(((double)c + alpha) / ((double)nk[k] + vbeta));
}

extern "C" __global__ void lda_dense_sample(
        const long long* panel_ptr, const int* panel_word0, const int* word, const int* doc,
        const long long* keys, const int* z, const long long* doc_ptr, const int* d_topic,
        const int* d_cnt, const int* d_nnz, const int* W, const long long* nk, const float* dnt,
        int K, int panel_words, double alpha, double beta, double vbeta, double w_self,
        u64 seed, u64 it, int exclude, int* z_out) {
    extern __shared__ int sW[];
    int p = blockIdx.x;
    long long tb = panel_ptr[p], te = panel_ptr[p + 1];
    int w0 = panel_word0[p];
    for (int i = threadIdx.x; i < panel_words * K; i += blockDim.x) {
        long long g = (long long)w0 * K + i;
        sW[i] = W[g];
    }
    __syncthreads();
    for (long long t = tb + threadIdx.x; t < te; t += blockDim.x) {
        int v = word[t];
        int d = doc[t];
        int zo = exclude ? z[t] : -1;
        int lv = (v - w0) * K;
        double own = 0.0;
        if (zo >= 0) {
            // the own topic's term with the token taken out of D, W and n
            int dz = lda_find(d_topic, d_cnt, doc_ptr[d], d_nnz[d], zo);
            own = ((double)dz - 1.0 + alpha) / ((double)nk[zo] - w_self + vbeta);
        }
        double sum = 0.0;
        for (int k = 0; k < K; k++) {
            double pk;
            if (k == zo) pk = ((double)sW[lv + k] - w_self + beta) * own;
            else pk = ((double)sW[lv + k] + beta) * (double)dnt[(long long)d * K + k];
            sum = sum + pk;
        }
        double x = lda_uniform(seed, it, (u64)keys[t]) * sum;
        double acc = 0.0;
        int pick = K - 1;
        for (int k = 0; k < K; k++) {
            double pk;
            if (k == zo) pk = ((double)sW[lv + k] - w_self + beta) * own;
            else pk = ((double)sW[lv + k] + beta) * (double)dnt[(long long)d * K + k];
            acc = acc + pk;
            if (acc > x) { pick = k; break; }
        }
        z_out[t] = pick;
    }
}

// log2 of Eq. 5's inner sum for every token: (sum_k D[d][k] What[v][k] + alpha sum_k What[v][k]) / (L_d + K alpha)
extern "C" __global__ void lda_llpt_terms(long long n, const int* word, const int* doc, const long long* doc_ptr,
                                          const int* d_topic, const int* d_cnt, const int* d_nnz,
                                          const float* what, const double* qtot, int K, double alpha,
                                          double* out) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int v = word[t];
    int d = doc[t];
    long long row = (long long)v * K;
    long long base = doc_ptr[d];
    int L = (int)(doc_ptr[d + 1] - base);
    int nnz = d_nnz[d];
    double s = 0.0;
    for (int j = 0; j < nnz; j++) {
        s = s + (double)d_cnt[base + j] * (double)what[row + d_topic[base + j]];
    }
    double p = (s + alpha * qtot[v]) / ((double)L + (double)K * alpha);
    out[t] = log2(p);
}

// ----------------------------------------------------------------------------- hybrid dense/sparse W
// EZLDA section IV-B: words with more than K tokens (ids 0 .. n_dense-1 after the frequency
// relabelling) keep dense rows W_dense (n_dense x K int32, with their What / qcum rows); every other
// word v keeps a sparse row s = v - n_dense in padded CSR: w_topic / w_cnt at w_ptr[s] (capacity = the
// word's token count <= K, so the offsets never change), w_nnz[s] entries, topics ascending.  Sparse rows
// are rebuilt like D rows (lda_rebuild_d over keys s * K + z sorted in word-major order).

// W_dense[v][k] += 1 for the tokens of dense words (integer atomics); other tokens are skipped
extern "C" __global__ void lda_rebuild_w_dense(const int* word, const int* z, long long n, int K, int n_dense,
                                               int* W) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int v = word[i];
    if (v < n_dense) atomicAdd(&W[(long long)v * K + z[i]], 1);
}

// inv[k] = 1 / (n_k + V beta) and its running sums rcum[k] = inv[0] + ... + inv[k], accumulated in
// float64 from k = 0 upwards (one thread: the order is sequential by definition)
extern "C" __global__ void lda_hybrid_topics(const long long* nk, int K, double vbeta, double* inv, double* rcum) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    double acc = 0.0;
    for (int k = 0; k < K; k++) {
        const double x = 1.0 / ((double)nk[k] + vbeta);
        inv[k] = x;
        acc = acc + x;
        rcum[k] = acc;
    }
}

// ydoc[d] = sum over the nonzeros j of D[d], in order, of cnt_j * inv[topic_j] (float64, sequential)
extern "C" __global__ void lda_hybrid_doc_y(const long long* doc_ptr, const int* d_topic, const int* d_cnt,
                                            const int* d_nnz, int n_docs, const double* inv, double* ydoc) {
    int d = blockIdx.x * blockDim.x + threadIdx.x;
    if (d >= n_docs) return;
    const long long base = doc_ptr[d];
    const int nnz = d_nnz[d];
    double acc = 0.0;
    for (int j = 0; j < nnz; j++) acc = acc + (double)d_cnt[base + j] * inv[d_topic[base + j]];
    ydoc[d] = acc;
}

// zsum[s] = sum over the nonzeros j of sparse row s, in row order, of c_j * inv[topic_j] (float64, sequential;
// one thread per sparse word): the word side of SparseLDA's doc-side split (Z_v = alpha (zsum[s] - own term))
extern "C" __global__ void lda_hybrid_word_z(const long long* w_ptr, const int* w_topic, const int* w_cnt,
                                             const int* w_nnz, int n_sparse, const double* inv, double* zsum) {
    int s = blockIdx.x * blockDim.x + threadIdx.x;
    if (s >= n_sparse) return;
    const long long wb = w_ptr[s];
    const int wn = w_nnz[s];
    double acc = 0.0;
    for (int j = 0; j < wn; j++) acc = acc + (double)w_cnt[wb + j] * inv[w_topic[wb + j]];
    zsum[s] = acc;
}

// D[d][k] for ascending topics k along a walk of a W row: a binary search of the D row (merge == 0) or
// a forward merge from *p (merge != 0; cheaper when the W row is not much shorter than the D row).  Both
// return the same count, so the choice changes no float operation.
__device__ __forceinline__ int lda_dcount(const int* d_topic, const int* d_cnt, long long base, int nnz, int k,
                                          int merge, int* p) {
    if (!merge) return lda_find(d_topic, d_cnt, base, nnz, k);
    int q = *p;
    while (q < nnz && d_topic[base + q] < k) q++;
    *p = q;
    return (q < nnz && d_topic[base + q] == k) ? d_cnt[base + q] : 0;
}

// The X bucket of lda_sample_hybrid, written once for its sum (search == 0: every entry, returns the sum,
// *pick untouched) and its search (search != 0: stops at the first entry whose running sum exceeds x,
// *pick = its topic, else the last topic walked).  Word side: over W[v]'s nonzeros j (k_j != zs) the running sum of
// (D[d][k_j] + alpha) * (c_j * inv[k_j]); doc side: over D[d]'s nonzeros j (k_j != zs, W[v][k_j] > 0) of
// cnt_j * (W[v][k_j] * inv[k_j]).  The numba twin is kernels/lda_hybrid.py::_x_bucket.
__device__ __forceinline__ double lda_hybrid_x(int docside, int merge, int zs, const int* d_topic, const int* d_cnt,
                                               long long base, int nnz, const int* w_topic, const int* w_cnt,
                                               long long wb, int wn, const double* inv, double alpha, int search,
                                               double x, int* pick) {
    double acc = 0.0;
    int last = -1;
    if (docside) {
        for (int j = 0; j < nnz; j++) {
            const int k = d_topic[base + j];
            if (k == zs) continue;
            const int wk = lda_find(w_topic, w_cnt, wb, wn, k);
            if (wk == 0) continue;
            acc = acc + (double)d_cnt[base + j] * ((double)wk * inv[k]);
            last = k;
            if (search && acc > x) { *pick = k; return acc; }
        }
    } else {
        int mp = 0;
        for (int j = 0; j < wn; j++) {
            const int k = w_topic[wb + j];
            if (k == zs) continue;
            const int dk = lda_dcount(d_topic, d_cnt, base, nnz, k, merge, &mp);
            acc = acc + ((double)dk + alpha) * ((double)w_cnt[wb + j] * inv[k]);
            last = k;
            if (search && acc > x) { *pick = k; return acc; }
        }
    }
    if (search) *pick = last;
    return acc;
}

// One Gibbs draw for every token of a SPARSE word (v >= n_dense; other threads return at once), one
// thread per token.  p(k) ∝ (D[d][k] + alpha)(W[v][k] + beta) inv[k] with the token's own topic zs
// taken out of its counts (exclude != 0; D-1, W-1, n-1 as lda_sample's own-topic branch).  Buckets over
// k != zs, searched in this order after the own topic (SparseLDA split, exact: they sum to the
// conditional up to rounding):
//   own  zw = (D[d][zs] - 1 + alpha) (W[v][zs] - 1 + beta) / (n_zs - 1 + V beta)        flag 3
// then, word side (nnz(W[v]) <= doc_c * nnz(D[d])):
//   X  = sum over W[v]'s nonzeros j (in order, k_j != zs) of (D[d][k_j] + alpha) * (c_j * inv[k_j])
//        (D[d][k_j] by lda_dcount: binary search, or a merge when 8 nnz(W[v]) >= nnz(D[d])) flag 4
//   Zv = 0
// or doc side (nnz(W[v]) > doc_c * nnz(D[d]): a long W row, a short D row):
//   X  = S_d = sum over D[d]'s nonzeros j (in order, k_j != zs, W[v][k_j] > 0) of
//        cnt_j * (W[v][k_j] * inv[k_j])  (W[v][k_j] by binary search of the sparse row)   flag 7
//   Zv = alpha * (zsum[s] - W[v][zs] inv[zs])  (lda_hybrid_word_z; 0 own term when zs < 0) flag 8
// and in both cases
//   Y  = beta * (ydoc[d] - D[d][zs] * inv[zs])                                           flag 5
//   R  = (alpha * beta) * (rcum[K-1] - inv[zs])                                          flag 6
// total = (((zw + X) + Zv) + Y) + R, x = u * total (the word side adds Zv = 0.0: exact, so its draws are
// those of the word-side-only sampler).  X is searched by re-running its sum in the same order (lda_hybrid_x:
// the first entry whose running sum exceeds x, else the last one); Zv by walking W[v] (k != zs) with the running sum
// acc of c * inv[k], first entry with alpha * acc > x (else the last); Y by walking D[d] (k != zs) with
// the running sum acc of cnt * inv[k], first entry with beta * acc > x (else the last); R by a binary
// search of rcum with inv[zs] subtracted from the entries at or past zs.  The numba twin is
// kernels/lda_hybrid.py::_hybrid_one.
extern "C" __global__ void lda_sample_hybrid(
        long long n, const int* word, const int* doc, const long long* keys, const int* z,
        const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
        int n_dense, const long long* w_ptr, const int* w_topic, const int* w_cnt, const int* w_nnz,
        const long long* nk, const double* inv, const double* rcum, const double* ydoc, const double* zsum,
        int K, double alpha, double beta, double vbeta, u64 seed, u64 it, int exclude, int doc_c,
        int* z_out, signed char* flags) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const int v = word[t];
    if (v < n_dense) return;
    const int d = doc[t];
    const int zs = exclude ? z[t] : -1;
    const long long base = doc_ptr[d];
    const int nnz = d_nnz[d];
    const int s = v - n_dense;
    const long long wb = w_ptr[s];
    const int wn = w_nnz[s];
    const double u = lda_uniform(seed, it, (u64)keys[t]);
    double zw = 0.0, iz = 0.0, yown = 0.0, zown = 0.0;
    if (zs >= 0) {
        const int dz = lda_find(d_topic, d_cnt, base, nnz, zs);
        const int wz = lda_find(w_topic, w_cnt, wb, wn, zs);
        const double wadj = ((double)wz - 1.0 + beta) / ((double)nk[zs] - 1.0 + vbeta);
        zw = ((double)dz - 1.0 + alpha) * wadj;
        iz = inv[zs];
        yown = (double)dz * iz;
        zown = (double)wz * iz;
    }
    const int docside = (long long)wn > (long long)doc_c * (long long)nnz;
    const int merge = 8 * wn >= nnz;
    int pick = -1;
    const double X = lda_hybrid_x(docside, merge, zs, d_topic, d_cnt, base, nnz, w_topic, w_cnt, wb, wn, inv, alpha,
                                  0, 0.0, &pick);
    const double Zv = docside ? alpha * (zsum[s] - zown) : 0.0;
    const double Y = beta * (ydoc[d] - yown);
    const double R = (alpha * beta) * (rcum[K - 1] - iz);
    double tot = zw + X;
    tot = tot + Zv;
    tot = tot + Y;
    tot = tot + R;
    double x = u * tot;
    signed char flag;
    if (x < zw) { pick = zs; flag = 3; }
    else {
        x = x - zw;
        if (x < X) {
            flag = docside ? 7 : 4;
            lda_hybrid_x(docside, merge, zs, d_topic, d_cnt, base, nnz, w_topic, w_cnt, wb, wn, inv, alpha, 1, x,
                         &pick);
        } else {
            x = x - X;
            if (x < Zv) {
                flag = 8;
                double acc = 0.0;
                int last = -1;
                for (int j = 0; j < wn; j++) {
                    const int k = w_topic[wb + j];
                    if (k == zs) continue;
                    acc = acc + (double)w_cnt[wb + j] * inv[k];
                    last = k;
                    if (alpha * acc > x) { pick = k; break; }
                }
                if (pick < 0) pick = last;
            } else {
                x = x - Zv;
                if (x < Y) {
                    flag = 5;
                    double acc = 0.0;
                    int last = -1;
                    for (int j = 0; j < nnz; j++) {
                        const int k = d_topic[base + j];
                        if (k == zs) continue;
                        acc = acc + (double)d_cnt[base + j] * inv[k];
                        last = k;
                        if (beta * acc > x) { pick = k; break; }
                    }
                    if (pick < 0) pick = last;
                } else {
                    flag = 6;
                    const double y = x - Y;
                    const double ab = alpha * beta;
                    int lo = 0, hi = K - 1;
                    while (lo < hi) {
                        const int mid = (lo + hi) >> 1;
                        double c = rcum[mid];
                        if (zs >= 0 && mid >= zs) c = c - iz;
                        if (ab * c > y) hi = mid; else lo = mid + 1;
                    }
                    pick = lo;
                }
            }
        }
    }
    z_out[t] = pick;
    flags[t] = flag;
}

// log2 of Eq. 5's inner sum for every token of the hybrid state: dense words as lda_llpt_terms (float32
// What rows); a sparse word v from its sparse row: phi_k = (W[v][k] + beta) inv[k] in float64,
// S = sum over D[d]'s nonzeros j (in order) of cnt_j * ((W[v][k_j] + beta) * inv[k_j]),
// Q = (sum over W[v]'s nonzeros (in order) of c * inv[k]) + beta * rcum[K-1],
// p = (S + alpha Q) / (L_d + K alpha).
extern "C" __global__ void lda_llpt_hybrid(long long n, const int* word, const int* doc, const long long* doc_ptr,
                                           const int* d_topic, const int* d_cnt, const int* d_nnz, int n_dense,
                                           const float* what, const double* qtot, const long long* w_ptr,
                                           const int* w_topic, const int* w_cnt, const int* w_nnz,
                                           const double* inv, const double* rcum, int K, double alpha,
                                           double beta, double* out) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    const int v = word[t];
    const int d = doc[t];
    const long long base = doc_ptr[d];
    const int L = (int)(doc_ptr[d + 1] - base);
    const int nnz = d_nnz[d];
    double s = 0.0, q;
    if (v < n_dense) {
        const long long row = (long long)v * K;
        for (int j = 0; j < nnz; j++) s = s + (double)d_cnt[base + j] * (double)what[row + d_topic[base + j]];
        q = qtot[v];
    } else {
        const long long wb = w_ptr[v - n_dense];
        const int wn = w_nnz[v - n_dense];
        for (int j = 0; j < nnz; j++) {
            const int k = d_topic[base + j];
            const int wk = lda_find(w_topic, w_cnt, wb, wn, k);
            s = s + (double)d_cnt[base + j] * (((double)wk + beta) * inv[k]);
        }
        q = 0.0;
        for (int j = 0; j < wn; j++) q = q + (double)w_cnt[wb + j] * inv[w_topic[wb + j]];
        q = q + beta * rcum[K - 1];
    }
    const double p = (s + alpha * q) / ((double)L + (double)K * alpha);
    out[t] = log2(p);
}
