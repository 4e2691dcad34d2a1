// Runs the CUDA C of kernels/search.cu on the CPU: one std::thread per CUDA thread, blocks one after another.
#include "emu_block_threads.h"
// device atomics: blocks run one after another, so only the threads of one block race
static int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned int atomicAdd(unsigned int* p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned int __float_as_uint(float f) { unsigned int u; std::memcpy(&u, &f, 4); return u; }
static float __uint_as_float(unsigned int u) { float f; std::memcpy(&f, &u, 4); return f; }
#include KERNEL_SOURCE
extern "C" {
// one launcher per kernel: grid (gx, gy), block bx, then the kernel's own arguments (fake_cupy.py calls them)
void launch_bm25_tile_score(unsigned gx, unsigned gy, unsigned bx, const long long* indptr, const int* indices,
                            const float* data, const long long* q_ptr, const int* q_terms, const float* q_w, int d0,
                            int d1, long long tile, float* acc, int* cand, int* cand_n) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        bm25_tile_score(indptr, indices, data, q_ptr, q_terms, q_w, d0, d1, tile, acc, cand, cand_n); });
}
void launch_bm25_tile_select(unsigned gx, unsigned gy, unsigned bx, float* acc, int* cand, int* cand_n,
                             long long tile, int d0, int k, const unsigned long long* top_in, const int* top_in_n,
                             unsigned long long* top_out, int* top_out_n) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        bm25_tile_select(acc, cand, cand_n, tile, d0, k, top_in, top_in_n, top_out, top_out_n); });
}
void launch_bm25_topk_sort(unsigned gx, unsigned gy, unsigned bx, const unsigned long long* top, const int* top_n,
                           int k, long long* out_doc, float* out_score) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] { bm25_topk_sort(top, top_n, k, out_doc, out_score); });
}
}
