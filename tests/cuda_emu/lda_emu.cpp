// Host emulation of kernels/lda.cu for tests/test_lda_cuda_host.py (tests/cuda_emu/: one folder for the lda, ellpack
// and trie emulations): every CUDA thread of a launch is run
// in turn on the CPU (blocks of one thread for the dense kernel, whose shared-memory staging then
// needs no barrier).  Compiled with -ffp-contract=off, the counterpart of nvcc's --fmad=false.
// The warp-cooperative sampler lda_sample runs as 32 std::threads (one per lane) that meet at a
// barrier in every shuffle and ballot (compiled as C++20 for std::barrier).
#include <barrier>
#include <cmath>
#include <cstring>
#include <thread>
#include <vector>
struct dim3_ { unsigned x, y, z; };
static thread_local dim3_ blockIdx, threadIdx;
static dim3_ blockDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline int atomicAdd(int* a, int v) { int o = *a; *a += v; return o; }
static inline void __syncthreads() {}
alignas(16) int sW[1 << 16];  // the dynamic shared memory of the one-thread blocks (panel_words * K ints)
using std::log2;

// ---- warp intrinsics: every lane writes its value, all meet, every lane reads, all meet again
static std::barrier<>* g_warp = nullptr;
static unsigned long long g_slot[32];
template <class T> static T __shfl_sync(unsigned, T v, int src) {
    unsigned long long b = 0;
    std::memcpy(&b, &v, sizeof(T));
    g_slot[threadIdx.x & 31] = b;
    g_warp->arrive_and_wait();
    unsigned long long r = g_slot[src & 31];
    g_warp->arrive_and_wait();
    T out;
    std::memcpy(&out, &r, sizeof(T));
    return out;
}
template <class T> static T __shfl_up_sync(unsigned m, T v, unsigned off) {
    int lane = threadIdx.x & 31;
    return __shfl_sync(m, v, lane >= (int)off ? lane - (int)off : lane);  // low lanes keep their own value
}
static unsigned __ballot_sync(unsigned, int pred) {
    g_slot[threadIdx.x & 31] = pred ? 1ULL : 0ULL;
    g_warp->arrive_and_wait();
    unsigned m = 0;
    for (int l = 0; l < 32; l++) m |= (g_slot[l] ? 1u : 0u) << l;
    g_warp->arrive_and_wait();
    return m;
}
// the 32 lanes meet (lda_sample_doc: shared-memory D row written by all lanes, then read by all)
static void __syncwarp(unsigned = 0xffffffffu) { g_warp->arrive_and_wait(); }
static inline int __ffs(unsigned x) { return x ? __builtin_ctz(x) + 1 : 0; }
static inline int __clz(unsigned x) { return x ? __builtin_clz(x) : 32; }

#include LDA_CU  // -DLDA_CU='"path/to/kernels/lda.cu"'

// run fn(lane) on 32 threads that form one warp, block after block (blockDim.x = 32)
template <class F> static void warps(long long n_warps, F fn) {
    std::barrier<> bar(32);
    g_warp = &bar;
    blockDim.x = 32;
    std::vector<std::thread> th;
    for (int lane = 0; lane < 32; lane++)
        th.emplace_back([&, lane] {
            threadIdx.x = (unsigned)lane;
            for (long long w = 0; w < n_warps; w++) { blockIdx.x = (unsigned)w; fn(); }
        });
    for (auto& x : th) x.join();
    g_warp = nullptr;
}

static void grid1(long long n, long long t) { blockDim.x = 256; blockIdx.x = (unsigned)(t / 256); threadIdx.x = (unsigned)(t % 256); (void)n; }

extern "C" {
void h_uniform(u64 seed, u64 it, const long long* keys, long long n, double* out) {
    for (long long t = 0; t < n; t++) { grid1(n, t); lda_uniform_kernel(seed, it, keys, n, out); }
}
void h_init(u64 seed, const long long* keys, long long n, int K, int* z) {
    for (long long t = 0; t < n; t++) { grid1(n, t); lda_init_topics(seed, keys, n, K, z); }
}
void h_prepare(const int* W, const long long* nk, int V, int K, double beta, double vbeta, float* what, float* qcum,
               double* qtot, int* top, float* topv) {
    for (long long t = 0; t < V; t++) { grid1(V, t); lda_prepare_words(W, nk, V, K, beta, vbeta, what, qcum, qtot, top, topv); }
}
void h_sample(long long n, const int* word, const int* doc, const long long* keys, const int* z, const long long* doc_ptr,
              const int* d_topic, const int* d_cnt, const int* d_nnz, const int* W, const long long* nk,
              const float* what, const float* qcum, const double* qtot, const int* top, const float* topv, int K,
              double alpha, double beta, double vbeta, double w_self, u64 seed, u64 it, int three, int exclude,
              int* z_out, signed char* flags) {
    warps((n + 31) / 32, [&] {
        lda_sample(n, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, what, qcum, qtot, top,
                   topv, K, alpha, beta, vbeta, w_self, seed, it, three, exclude, z_out, flags);
    });
}
// lda_sample_doc over the doc-major positions tok[0 .. n): one warp a block (its shared memory is sW[0 .. 2 cap))
void h_sample_doc(long long n, const long long* tok, const int* word, const int* doc, const long long* keys,
                  const int* z, const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz,
                  const int* W, const long long* nk, const float* what, const float* qcum, const double* qtot,
                  const int* top, const float* topv, int K, double alpha, double beta, double vbeta, double w_self,
                  u64 seed, u64 it, int three, int exclude, int cap, int* z_out, signed char* flags) {
    if (2LL * cap > (long long)(sizeof(sW) / sizeof(sW[0]))) return;
    warps((n + 31) / 32, [&] {
        lda_sample_doc(n, tok, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, what, qcum, qtot, top,
                       topv, K, alpha, beta, vbeta, w_self, seed, it, three, exclude, cap, z_out, flags);
    });
}
void h_dnt(const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz, const long long* nk,
           int n_docs, int K, double alpha, double vbeta, float* dnt) {
    long long n = (long long)n_docs * K;
    for (long long t = 0; t < n; t++) { grid1(n, t); lda_dense_dnt(doc_ptr, d_topic, d_cnt, d_nnz, nk, n_docs, K, alpha, vbeta, dnt); }
}
void h_dense(int n_panels, const long long* panel_ptr, const int* panel_word0, const int* word, const int* doc,
             const long long* keys, const int* z, const long long* doc_ptr, const int* d_topic, const int* d_cnt,
             const int* d_nnz, const int* W, const long long* nk, const float* dnt, int K, int panel_words,
             double alpha, double beta, double vbeta, double w_self, u64 seed, u64 it, int exclude, int* z_out) {
    blockDim.x = 1; threadIdx.x = 0;
    for (int p = 0; p < n_panels; p++) {
        blockIdx.x = p;
        lda_dense_sample(panel_ptr, panel_word0, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, dnt, K,
                         panel_words, alpha, beta, vbeta, w_self, seed, it, exclude, z_out);
    }
}
void h_llpt(long long n, const int* word, const int* doc, const long long* doc_ptr, const int* d_topic,
            const int* d_cnt, const int* d_nnz, const float* what, const double* qtot, int K, double alpha, double* out) {
    for (long long t = 0; t < n; t++) { grid1(n, t); lda_llpt_terms(n, word, doc, doc_ptr, d_topic, d_cnt, d_nnz, what, qtot, K, alpha, out); }
}
void h_rebuild_w(const int* word, const int* z, long long n, int K, int* W) {
    for (long long t = 0; t < n; t++) { grid1(n, t); lda_rebuild_w(word, z, n, K, W); }
}
void h_rebuild_d_hist(const long long* doc_ptr, const long long* doc_tok, const int* z, int n_docs, int K,
                      int* d_topic, int* d_cnt, int* d_nnz) {
    blockDim.x = 1; threadIdx.x = 0;
    for (int d = 0; d < n_docs; d++) { blockIdx.x = (unsigned)d; lda_rebuild_d_hist(doc_ptr, doc_tok, z, n_docs, K, d_topic, d_cnt, d_nnz); }
}
void h_rebuild_d(const long long* doc_ptr, const long long* keys, int n_docs, int K, int* d_topic, int* d_cnt, int* d_nnz) {
    for (long long t = 0; t < n_docs; t++) { grid1(n_docs, t); lda_rebuild_d(doc_ptr, keys, n_docs, K, d_topic, d_cnt, d_nnz); }
}
}

// ---- hybrid dense/sparse W (thread-per-token and thread-per-row kernels: a plain loop over the threads)
extern "C" {
void h_rebuild_w_dense(const int* word, const int* z, long long n, int K, int n_dense, int* W) {
    for (long long t = 0; t < n; t++) { grid1(n, t); lda_rebuild_w_dense(word, z, n, K, n_dense, W); }
}
void h_hybrid_topics(const long long* nk, int K, double vbeta, double* inv, double* rcum) {
    grid1(1, 0);
    lda_hybrid_topics(nk, K, vbeta, inv, rcum);
}
void h_hybrid_doc_y(const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz, int n_docs,
                    const double* inv, double* ydoc) {
    for (long long t = 0; t < n_docs; t++) { grid1(n_docs, t); lda_hybrid_doc_y(doc_ptr, d_topic, d_cnt, d_nnz, n_docs, inv, ydoc); }
}
void h_hybrid_word_z(const long long* w_ptr, const int* w_topic, const int* w_cnt, const int* w_nnz, int n_sparse,
                     const double* inv, double* zsum) {
    for (long long t = 0; t < n_sparse; t++) {
        grid1(n_sparse, t);
        lda_hybrid_word_z(w_ptr, w_topic, w_cnt, w_nnz, n_sparse, inv, zsum);
    }
}
void h_sample_hybrid(long long n, const int* word, const int* doc, const long long* keys, const int* z,
                     const long long* doc_ptr, const int* d_topic, const int* d_cnt, const int* d_nnz, int n_dense,
                     const long long* w_ptr, const int* w_topic, const int* w_cnt, const int* w_nnz,
                     const long long* nk, const double* inv, const double* rcum, const double* ydoc,
                     const double* zsum, int K, double alpha, double beta, double vbeta, u64 seed, u64 it,
                     int exclude, int doc_c, int* z_out, signed char* flags) {
    for (long long t = 0; t < n; t++) {
        grid1(n, t);
        lda_sample_hybrid(n, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, n_dense, w_ptr, w_topic, w_cnt, w_nnz,
                          nk, inv, rcum, ydoc, zsum, K, alpha, beta, vbeta, seed, it, exclude, doc_c, z_out, flags);
    }
}
void h_llpt_hybrid(long long n, const int* word, const int* doc, const long long* doc_ptr, const int* d_topic,
                   const int* d_cnt, const int* d_nnz, int n_dense, const float* what, const double* qtot,
                   const long long* w_ptr, const int* w_topic, const int* w_cnt, const int* w_nnz, const double* inv,
                   const double* rcum, int K, double alpha, double beta, double* out) {
    for (long long t = 0; t < n; t++) {
        grid1(n, t);
        lda_llpt_hybrid(n, word, doc, doc_ptr, d_topic, d_cnt, d_nnz, n_dense, what, qtot, w_ptr, w_topic, w_cnt, w_nnz,
                        inv, rcum, K, alpha, beta, out);
    }
}
}
