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

// position of topic k in the sorted row r[0, nnz), or -1 (absent, or k < 0): binary search
__device__ __forceinline__ int lda_pos(const int* r, int nnz, int k) {
    if (k < 0) return -1;
    int lo = 0, hi = nnz;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        if (r[mid] < k) lo = mid + 1; else hi = mid;
    }
    return (lo < nnz && r[lo] == k) ? lo : -1;
}

// count of topic k in the sorted D row [base, base+nnz); 0 when absent
__device__ __forceinline__ int lda_find(const int* d_topic, const int* d_cnt, long long base, int nnz, int k) {
    const int p = lda_pos(d_topic + base, nnz, k);
    return p >= 0 ? d_cnt[base + p] : 0;
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

// inclusive Kogge-Stone scan over the 32 lanes (lane l receives old[l - off] + old[l] for off = 1..16)
__device__ __forceinline__ double lda_warp_scan(double x, int lane) {
#pragma unroll
    for (int off = 1; off < 32; off <<= 1) {
        double y = __shfl_up_sync(LDA_FULL, x, off);
        if (lane >= off) x = y + x;
    }
    return x;
}

// p, opaque to the compiler: an address p + k stays one IMAD.WIDE on a pointer held in registers, instead of
// (v * K + k) recomputed in 64 bits from the kernel's parameters at every gather
__device__ __forceinline__ const float* lda_opaque(const float* p) {
#ifdef __CUDA_ARCH__
    asm("mov.b64 %0, %0;" : "+l"(p));
#endif
    return p;
}

// a D-row entry staged in shared memory: topic and count (as float), read with one 8-byte load
struct __align__(8) lda_entry { int k; float c; };

#ifndef LDA_SAMPLE_MINB
#define LDA_SAMPLE_MINB 4  // blocks of 256 resident per SM (64 registers)
#endif
#ifndef LDA_UNROLL
#define LDA_UNROLL 4       // D-row entries per lane loaded together in the lane sums
#endif

// This lane's sum of float(cnt_j) * What[v][topic_j] over j = lane, lane + 32, ... (topic_j != K1), in
// float, in that order.  Staged row: padded with {0, 0.0f} to `rounds` x 32 entries (a padded entry adds
// +0.0f, which leaves the sum as it is).  Global row: `nnz` entries.
__device__ __forceinline__ float lda_lane_sum_staged(const lda_entry* e, int rounds, const float* wrow, int K1,
                                                     int lane) {
    float A = 0.0f;
#pragma unroll LDA_UNROLL
    for (int r = 0; r < rounds; r++) {
        const lda_entry x = e[lane + 32 * r];
        const float w = x.k == K1 ? 0.0f : __ldg(wrow + x.k);
        A = A + x.c * w;
    }
    return A;
}

__device__ __forceinline__ float lda_lane_sum_global(const int* dt, const int* dc, int nnz, const float* wrow,
                                                     int K1, int lane) {
    float A = 0.0f;
    for (int j = lane; j < nnz; j += 32 * LDA_UNROLL) {
        int k[LDA_UNROLL];
        float c[LDA_UNROLL], w[LDA_UNROLL];
#pragma unroll
        for (int r = 0; r < LDA_UNROLL; r++) {
            const int jj = j + 32 * r;
            k[r] = jj < nnz ? __ldg(dt + jj) : K1;
            c[r] = jj < nnz ? (float)__ldg(dc + jj) : 0.0f;
        }
#pragma unroll
        for (int r = 0; r < LDA_UNROLL; r++) w[r] = k[r] == K1 ? 0.0f : __ldg(wrow + k[r]);
#pragma unroll
        for (int r = 0; r < LDA_UNROLL; r++) A = A + c[r] * w[r];
    }
    return A;
}

// One Gibbs draw per token against the counts of the previous pass (EZLDA Eq. 3-4 and, with three != 0,
// Eq. 6-10 with g = 2); with exclude != 0 the token's own assignment is taken out of its counts (collapsed
// Gibbs, Moon et al. Eq. 1): D[d][z]-1 always, and W[v][z]-w_self, n_z-w_self (w_self = 1 while training, 0
// for inference with W fixed).  One WARP samples 32 tokens.
//
// The draw.  K1 = the top topic of What[v] (three-branch; else none), zs = the own topic unless it is K1.
// M = the K1 term, zw = the own-topic term, Q = alpha (qtot[v] - What[v][K1] - What[v][zs]), and
// S' = sum over the nonzeros j of D[d] (topics other than K1 and zs) of cnt_j What[v][topic_j], defined
// lane-major: lane l's sum A_l = float(cnt_j) * What[v][topic_j] added in float over j = l, l+32, ... in
// order (K1 adding 0); a_l = double(A_l), minus cnt_zs What[v][zs] on the own topic's lane (pz & 31); an
// inclusive Kogge-Stone scan of the 32 a_l gives S' (lane 31).  x = u (M + zw + S' + Q) picks M, zw, S' or Q
// in that order.  In S' the lane Ls is the first whose inclusive sum exceeds x and whose a_l is positive
// (else the last lane with a positive a_l); its entries j = Ls, Ls+32, ... are walked in order, adding
// their float values (0 for K1 and zs) to a float acc: the first positive entry with incl[Ls-1] + acc > x
// is drawn (else the last positive entry of the lane; a lane of excluded entries alone, whose a_l is a
// rounding residue, gives the row's last positive entry, and a row of none gives Q's first topic).  In Q, a
// binary search of the running sums qcum.
// The numba twin kernels/lda.py::_twin_sample performs the same float operations in the same order, so
// draws are equal token for token, in either token order.
//
// The work.  (1) Each lane takes its own token: its loads, the positions of K1, K2 and zs in the D row
// (binary searches), M and the three-branch skip test (Eq. 10 with S_est, flag 2: no S' needed), zw, Q.
// (2) For every token still undecided, one after another, the warp builds the lane sums (shared by
// consecutive tokens of the same word and document: tokens are sorted by word and document inside a chunk)
// and their scan; the token's lane decides the branch and, in S', the warp picks Ls.  (3) Each lane
// finishes its own token: the walk of lane Ls's entries, or the Q search.  Only (2) is serial in the tokens.
// DOC: warp w takes the document-major positions [32 w, 32 w + 32) of tok (one or a few documents a
// warp); a document's D row is staged in the warp's slice of shared memory (cap entries of 8 bytes) when it
// fits once padded to a multiple of 32.  Else tokens [32 w, 32 w + 32) of the chunk order (sorted by word),
// rows read from global memory.  Results are written at the tokens' own positions.
// flags: 0 = S or Q branch, 1 = max-topic branch after building S', 2 = skipped (decided by the S_est
// bound before S' is built), 3 = own-topic branch.
template <bool DOC>
__device__ __forceinline__ void lda_sample_warp(
        long long n, const long long* tok, const int* word, const int* doc, const long long* keys, const int* z,
        const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
        const int* W, const long long* nk, const float* what, const float* qcum, const double* qtot,
        const int* top, const float* topv, int K, double alpha, double beta, double vbeta,
        double w_self, u64 seed, u64 it, int three, int exclude, int cap, lda_entry* s_row, int* z_out,
        signed char* flags) {
    const int lane = threadIdx.x & 31;
    const long long p0 = (((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5) << 5;
    if (p0 >= n) return;
    const int cnt = n - p0 < 32 ? (int)(n - p0) : 32;
    // (1) this lane's token
    long long t = 0;
    int my_v = 0, my_d = 0, my_k1 = -1, my_zs = -1, my_pz = -1;
    double my_u = 0.0, my_M = 0.0, my_zw = 0.0, my_szs = 0.0, my_Q = 0.0;
    int res_z = 0;
    signed char res_f = 0;
    bool need = false;
    if (lane < cnt) {
        t = DOC ? tok[p0 + lane] : p0 + lane;
        my_v = word[t];
        my_d = doc[t];
        const int zo = z[t];
        my_u = lda_uniform(seed, it, (u64)keys[t]);
        const long long base = doc_ptr[my_d];
        const int nnz = d_nnz[my_d];
        const int* rt = d_topic + base;
        const long long row = (long long)my_v * K;
        int K2 = -1;
        if (three) { my_k1 = top[2 * my_v]; K2 = top[2 * my_v + 1]; }
        const int K1 = my_k1;
        my_zs = (exclude && zo != K1) ? zo : -1;
        const int p1 = lda_pos(rt, nnz, K1);
        const int p2 = lda_pos(rt, nnz, K2);
        my_pz = lda_pos(rt, nnz, my_zs);
        double a1d = 0.0;
        need = true;
        if (three) {
            const int b1 = p1 >= 0 ? d_cnt[base + p1] : 0;
            a1d = (double)topv[3 * my_v];
            if (exclude && zo == K1) {
                double wadj = ((double)W[row + K1] - w_self + beta) / ((double)nk[K1] - w_self + vbeta);
                my_M = ((double)b1 - 1.0 + alpha) * wadj;
            } else {
                my_M = ((double)b1 + alpha) * a1d;
            }
            // skip test with S_est (Eq. 10, g = 2) and Q' = alpha (sum What[v] - a1)
            const int b2 = p2 >= 0 ? d_cnt[base + p2] : 0;
            double a2d = (double)topv[3 * my_v + 1];
            double a3d = (double)topv[3 * my_v + 2];
            double rest = (double)((int)(doc_ptr[my_d + 1] - base) - b1 - b2);
            double sest = a2d * (double)b2 + a3d * rest;
            double qb = alpha * (qtot[my_v] - a1d);
            double tt = my_M + sest;
            tt = tt + qb;
            if (my_u * tt < my_M) { res_z = K1; res_f = 2; need = false; }
        }
        if (need) {
            double wzs = 0.0;
            if (my_zs >= 0) {
                const int dz = my_pz >= 0 ? d_cnt[base + my_pz] : 0;
                double wadj = ((double)W[row + my_zs] - w_self + beta) / ((double)nk[my_zs] - w_self + vbeta);
                my_zw = ((double)dz - 1.0 + alpha) * wadj;
                wzs = (double)what[row + my_zs];
                my_szs = (double)dz * wzs;
            }
            double q = qtot[my_v];
            if (K1 >= 0) q = q - a1d;
            if (my_zs >= 0) q = q - wzs;
            my_Q = alpha * q;
        }
    }
    // (2) the lane sums and their scan, token after token
    int my_br = 0;  // 1: walk lane my_Ls from my_carry to my_x; 2: Q search for my_x
    int my_Ls = 0;
    double my_x = 0.0, my_carry = 0.0;
    unsigned todo = __ballot_sync(LDA_FULL, need);
    int pv = -1, pd = -1, cur_d = -1, nnz = 0, rounds = -1;  // rounds >= 0: the row is staged
    const int* dt = d_topic;
    const int* dc = d_cnt;
    float A = 0.0f;
    while (todo) {
        const int i = __ffs(todo) - 1;
        todo &= todo - 1;
        const int v = __shfl_sync(LDA_FULL, my_v, i);
        const int d = __shfl_sync(LDA_FULL, my_d, i);
        const int K1 = __shfl_sync(LDA_FULL, my_k1, i);
        if (d != cur_d) {  // warp-uniform loads, once per document run
            const long long base = doc_ptr[d];
            nnz = d_nnz[d];
            dt = d_topic + base;
            dc = d_cnt + base;
            rounds = -1;
            if (DOC) {
                const int padded = (nnz + 31) & ~31;
                __syncwarp();  // every lane is done with the previous row
                if (padded <= cap) {
                    for (int j = lane; j < padded; j += 32) {
                        lda_entry e;
                        e.k = j < nnz ? dt[j] : 0;
                        e.c = j < nnz ? (float)dc[j] : 0.0f;
                        s_row[j] = e;
                    }
                    __syncwarp();
                    rounds = padded >> 5;
                }
            }
            cur_d = d;
            pv = -1;
        }
        if (v != pv || d != pd) {
            const float* wrow = lda_opaque(what + (long long)v * K);
            A = rounds >= 0 ? lda_lane_sum_staged(s_row, rounds, wrow, K1, lane)
                            : lda_lane_sum_global(dt, dc, nnz, wrow, K1, lane);
            pv = v;
            pd = d;
        }
        const int pz = __shfl_sync(LDA_FULL, my_pz, i);
        const double szs = __shfl_sync(LDA_FULL, my_szs, i);
        double a = (double)A;
        if (pz >= 0 && (pz & 31) == lane) a = a - szs;
        const double incl = lda_warp_scan(a, lane);
        const double s = __shfl_sync(LDA_FULL, incl, 31);
        // every lane evaluates the branch of its own token against this S'; lane i's result is kept
        double tot = my_M + my_zw;
        tot = tot + s;
        tot = tot + my_Q;
        double x = my_u * tot;
        int br = 0, pick = -1;
        signed char flag = 0;
        if (x < my_M) { pick = my_k1; flag = 1; }
        else {
            x = x - my_M;
            if (x < my_zw) { pick = my_zs; flag = 3; }
            else {
                x = x - my_zw;
                if (x < s) br = 1;
                else { br = 2; x = x - s; }
            }
        }
        if (__shfl_sync(LDA_FULL, br, i) == 1) {
            const double xi = __shfl_sync(LDA_FULL, x, i);
            const unsigned m = __ballot_sync(LDA_FULL, incl > xi && a > 0.0);
            const int Ls = m ? __ffs(m) - 1 : 31 - __clz(__ballot_sync(LDA_FULL, a > 0.0));
            double carry = __shfl_sync(LDA_FULL, incl, Ls > 0 ? Ls - 1 : 0);
            if (Ls == 0) carry = 0.0;
            if (lane == i) { my_Ls = Ls; my_carry = carry; }
        }
        if (lane == i) {
            my_br = br;
            my_x = x;
            if (br == 0) { res_z = pick; res_f = flag; }
        }
    }
    // (3) this lane's token: the walk of lane Ls's entries, or the Q search
    if (my_br == 1) {
        const long long base = doc_ptr[my_d];
        const int rn = d_nnz[my_d];
        const float* wrow = lda_opaque(what + (long long)my_v * K);
        float acc = 0.0f;
        int last = -1, pick = -1;
        for (int j = my_Ls; j < rn; j += 32) {
            const int k = d_topic[base + j];
            if (k == my_k1 || k == my_zs) continue;
            const float val = (float)d_cnt[base + j] * wrow[k];
            acc = acc + val;
            if (val > 0.0f) {
                last = k;
                if (my_carry + (double)acc > my_x) { pick = k; break; }
            }
        }
        if (pick < 0 && last < 0) {  // lane Ls held only excluded entries (its sum a rounding residue)
            for (int j = rn - 1; j >= 0; --j) {  // the row's last drawable entry
                const int k = d_topic[base + j];
                if (k != my_k1 && k != my_zs && (float)d_cnt[base + j] * wrow[k] > 0.0f) { last = k; break; }
            }
        }
        if (pick >= 0 || last >= 0) {
            res_z = pick >= 0 ? pick : last;
            res_f = 0;
        } else {  // no drawable entry at all: the smoothing bucket's first topic
            my_br = 2;
            my_x = 0.0;
        }
    }
    if (my_br == 2) {
        const long long row = (long long)my_v * K;
        const double a1d = my_k1 >= 0 ? (double)topv[3 * my_v] : 0.0;
        const double wzs = my_zs >= 0 ? (double)what[row + my_zs] : 0.0;
        int lo = 0, hi = K - 1;
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            double c = (double)qcum[row + mid];
            if (my_k1 >= 0 && mid >= my_k1) c = c - a1d;
            if (my_zs >= 0 && mid >= my_zs) c = c - wzs;
            if (alpha * c > my_x) hi = mid; else lo = mid + 1;
        }
        res_z = lo;
        res_f = 0;
    }
    if (lane < cnt) {
        z_out[t] = res_z;
        flags[t] = res_f;
    }
}

// lda_sample_warp over the chunk order: warp w samples tokens [32 w, 32 w + 32), D rows from global memory.
// Launch: blocks of 256 threads.
extern "C" __global__ void __launch_bounds__(256, LDA_SAMPLE_MINB) lda_sample(
        long long n, const int* word, const int* doc, const long long* keys, const int* z,
        const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
        const int* W, const long long* nk, const float* what, const float* qcum, const double* qtot,
        const int* top, const float* topv, int K, double alpha, double beta, double vbeta,
        double w_self, u64 seed, u64 it, int three, int exclude, int* z_out, signed char* flags) {
    lda_sample_warp<false>(n, nullptr, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, what, qcum, qtot,
                           top, topv, K, alpha, beta, vbeta, w_self, seed, it, three, exclude, 0, nullptr, z_out,
                           flags);
}

// lda_sample_warp over the document-major positions of tok (the inverted index doc_tok): the same draws.
// Launch: blocks of 256 threads, dynamic shared memory 8 warps x cap entries of 8 bytes.
extern "C" __global__ void __launch_bounds__(256, LDA_SAMPLE_MINB) lda_sample_doc(
        long long n, const long long* tok, const int* word, const int* doc, const long long* keys, const int* z,
        const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
        const int* W, const long long* nk, const float* what, const float* qcum, const double* qtot,
        const int* top, const float* topv, int K, double alpha, double beta, double vbeta,
        double w_self, u64 seed, u64 it, int three, int exclude, int cap, int* z_out, signed char* flags) {
    extern __shared__ int sW[];
    lda_entry* s_row = reinterpret_cast<lda_entry*>(sW) + (threadIdx.x >> 5) * cap;
    lda_sample_warp<true>(n, tok, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, what, qcum, qtot,
                          top, topv, K, alpha, beta, vbeta, w_self, seed, it, three, exclude, cap, s_row, z_out,
                          flags);
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
