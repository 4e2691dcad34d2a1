// LDA collapsed Gibbs sampling kernels (paper 000 EZLDA, Eq. 1-10; paper 001 Alg. 2).
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

// One Gibbs draw per token against the counts of the previous pass (paper 000 Eq. 3-4 and, with
// three != 0, Eq. 6-10 with g = 2).  With exclude != 0 the token's own assignment is taken out of
// its counts (collapsed Gibbs, paper 001 Eq. 1): D[d][z]-1 always, and W[v][z]-w_self,
// n_z-w_self (w_self = 1 while training, 0 for inference with W fixed).
// flags: 0 = S or Q branch, 1 = max-topic branch after building S', 2 = skipped (decided by the
// S_est bound before S' is built), 3 = own-topic branch.
extern "C" __global__ void lda_sample(
        long long n, const int* word, const int* doc, const long long* keys, const int* z,
        const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
        const int* W, const long long* nk, const float* what, const float* qcum, const double* qtot,
        const int* top, const float* topv, int K, double alpha, double beta, double vbeta,
        double w_self, u64 seed, u64 it, int three, int exclude, int* z_out, signed char* flags) {
    long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= n) return;
    int v = word[t];
    int d = doc[t];
    int zo = z[t];
    long long row = (long long)v * K;
    long long base = doc_ptr[d];
    int L = (int)(doc_ptr[d + 1] - base);
    int nnz = d_nnz[d];
    double u = lda_uniform(seed, it, (u64)keys[t]);

    int K1 = -1;
    double a1d = 0.0;
    double M = 0.0;
    int b1 = 0;
    if (three) {
        K1 = top[2 * v];
        a1d = (double)topv[3 * v];
        b1 = lda_find(d_topic, d_cnt, base, nnz, K1);
        if (exclude && zo == K1) {
            double wadj = ((double)W[row + K1] - w_self + beta) / ((double)nk[K1] - w_self + vbeta);
            M = ((double)b1 - 1.0 + alpha) * wadj;
        } else {
            M = ((double)b1 + alpha) * a1d;
        }
        // skip test with S_est (Eq. 10, g = 2) and Q' = alpha (sum What[v] - a1)
        int K2 = top[2 * v + 1];
        int b2 = K2 >= 0 ? lda_find(d_topic, d_cnt, base, nnz, K2) : 0;
        double a2d = (double)topv[3 * v + 1];
        double a3d = (double)topv[3 * v + 2];
        double rest = (double)(L - b1 - b2);
        double sest = a2d * (double)b2 + a3d * rest;
        double qb = alpha * (qtot[v] - a1d);
        double tt = M + sest;
        tt = tt + qb;
        if (u * tt < M) {
            z_out[t] = K1;
            flags[t] = 2;
            return;
        }
    }
    int zs = -1;
    double zw = 0.0;
    double wzs = 0.0;
    if (exclude && zo != K1) {
        zs = zo;
        int dz = lda_find(d_topic, d_cnt, base, nnz, zs);
        double wadj = ((double)W[row + zs] - w_self + beta) / ((double)nk[zs] - w_self + vbeta);
        zw = ((double)dz - 1.0 + alpha) * wadj;
        wzs = (double)what[row + zs];
    }
    double s = 0.0;
    for (int j = 0; j < nnz; j++) {
        int k = d_topic[base + j];
        if (k == K1 || k == zs) continue;
        s = s + (double)d_cnt[base + j] * (double)what[row + k];
    }
    double q = qtot[v];
    if (K1 >= 0) q = q - a1d;
    if (zs >= 0) q = q - wzs;
    double Q = alpha * q;
    double tot = M + zw;
    tot = tot + s;
    tot = tot + Q;
    double x = u * tot;
    if (x < M) { z_out[t] = K1; flags[t] = 1; return; }
    x = x - M;
    if (x < zw) { z_out[t] = zs; flags[t] = 3; return; }
    x = x - zw;
    flags[t] = 0;
    if (x < s) {
        double acc = 0.0;
        int last = -1;
        for (int j = 0; j < nnz; j++) {
            int k = d_topic[base + j];
            if (k == K1 || k == zs) continue;
            acc = acc + (double)d_cnt[base + j] * (double)what[row + k];
            last = k;
            if (acc > x) break;
        }
        z_out[t] = last;
        return;
    }
    double y = x - s;
    int lo = 0, hi = K - 1;
    while (lo < hi) {
        int mid = (lo + hi) >> 1;
        double c = (double)qcum[row + mid];
        if (K1 >= 0 && mid >= K1) c = c - a1d;
        if (zs >= 0 && mid >= zs) c = c - wzs;
        if (alpha * c > y) hi = mid; else lo = mid + 1;
    }
    z_out[t] = lo;
}

// Paper 001 (Alg. 2, 4) dense sampler for small K: DNT[d][k] = (D[d][k] - own + alpha) / (n_k - own + V beta)
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
