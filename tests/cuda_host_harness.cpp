// Host emulation of kernels/lda.cu for tests/test_lda_cuda_host.py: every CUDA thread of a launch is run
// in turn on the CPU (blocks of one thread for the dense kernel, whose shared-memory staging then
// needs no barrier).  Compiled with -ffp-contract=off, the counterpart of nvcc's --fmad=false.
#include <cmath>
struct dim3_ { unsigned x, y, z; };
static dim3_ blockIdx, threadIdx, blockDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__
static inline int atomicAdd(int* a, int v) { int o = *a; *a += v; return o; }
static inline void __syncthreads() {}
int sW[1 << 16];  // the dynamic shared memory of the one-thread blocks (panel_words * K ints)
using std::log2;
#include LDA_CU  // -DLDA_CU='"path/to/kernels/lda.cu"'

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
    for (long long t = 0; t < n; t++) {
        grid1(n, t);
        lda_sample(n, word, doc, keys, z, doc_ptr, d_topic, d_cnt, d_nnz, W, nk, what, qcum, qtot, top, topv, K,
                   alpha, beta, vbeta, w_self, seed, it, three, exclude, z_out, flags);
    }
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
void h_rebuild_d(const long long* doc_ptr, const long long* keys, int n_docs, int K, int* d_topic, int* d_cnt, int* d_nnz) {
    for (long long t = 0; t < n_docs; t++) { grid1(n_docs, t); lda_rebuild_d(doc_ptr, keys, n_docs, K, d_topic, d_cnt, d_nnz); }
}
}
