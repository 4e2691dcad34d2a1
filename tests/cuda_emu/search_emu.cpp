// Runs the CUDA C of kernels/search.cu on the CPU: one std::thread per CUDA thread, blocks one after another.
#include "emu_block_threads.h"
#include <cmath>
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// the vector type of the filter's four-score loads
struct alignas(16) float4 { float x, y, z, w; };
static float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
// device atomics: blocks run one after another, so only the threads of one block race
static int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned int atomicAdd(unsigned int* p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned int atomicOr(unsigned int* p, unsigned int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
static unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
template <class T> static T __ldg(const T* p) { return *p; }  // the read-only cache's load: a plain load here
// __syncthreads_count: a barrier that returns how many threads of the block passed a true predicate.  Three
// barriers: (A) the count of the previous call has been read by all, (B) all have added, (C) all have read;
// thread 0 then resets it (the next adds come after the next (A), which thread 0 reaches after the reset).
static int __syncthreads_count(int pred) {
    static int count = 0;
    __syncthreads();
    if (pred) __atomic_fetch_add(&count, 1, __ATOMIC_SEQ_CST);
    __syncthreads();
    const int r = __atomic_load_n(&count, __ATOMIC_SEQ_CST);
    __syncthreads();
    if (threadIdx.x == 0) count = 0;
    return r;
}
static int __syncthreads_and(int pred) { return __syncthreads_count(pred) == (int)blockDim.x; }
#include KERNEL_SOURCE
extern "C" {
// one launcher per kernel: grid (gx, gy), block bx, then the kernel's own arguments (fake_cupy.py calls them)
void launch_bm25_block_search(unsigned gx, unsigned gy, unsigned bx, const long long* indptr, const int* indices,
                              const float* data, const long long* q_ptr, const int* q_terms, const float* q_w,
                              int n_docs, int k, long long* cursor, unsigned long long* top_a,
                              unsigned long long* top_b, int* top_n, int fmode, const unsigned int* allow_bits,
                              const long long* a_ptr, const int* a_docs, const int* q_order) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        bm25_block_search(indptr, indices, data, q_ptr, q_terms, q_w, n_docs, k, cursor, top_a, top_b, top_n, fmode,
                          allow_bits, a_ptr, a_docs, q_order); });
}
void launch_bm25_topk_sort(unsigned gx, unsigned gy, unsigned bx, const unsigned long long* top, const int* top_n,
                           int k, long long* out_doc, float* out_score) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] { bm25_topk_sort(top, top_n, k, out_doc, out_score); });
}
}
