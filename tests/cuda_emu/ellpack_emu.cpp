// Runs the CUDA C of kernels/ellpack.cu on the CPU: one std::thread per CUDA thread, blocks one after another.
#include "emu_block_threads.h"
#include <cmath>
// device atomics: blocks run one after another, so only the threads of one block race
static int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned int atomicOr(unsigned int* p, unsigned int v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
static unsigned int atomicAnd(unsigned int* p, unsigned int v) { return __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); }
static unsigned int atomicAdd(unsigned int* p, unsigned int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static unsigned int atomicExch(unsigned int* p, unsigned int v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
static int atomicMax(int* p, int v) {
    int cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return cur;
}
static void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
template <class T> static T __ldcg(const T* p) { return *p; }
#include KERNEL_SOURCE
extern "C" {
// one launcher per kernel: grid (gx, gy), block bx, then the kernel's own arguments
void launch_ct_block_max(unsigned gx, unsigned gy, unsigned bx, int* idx, double* w, long long stride, int n_rows,
                         int K, const int* dterm, const double* dw, const int* dlen, int upd_row, const int* ui,
                         const double* uw, double* out_sim, int* out_id) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        ct_block_max(idx, w, stride, n_rows, K, dterm, dw, dlen, upd_row, ui, uw, out_sim, out_id); });
}
void launch_ct_block_max_multi(unsigned gx, unsigned gy, unsigned bx, const int* idx, const double* w,
                               long long stride, int n_rows, int K, const int* dterm, const double* dw,
                               const int* dlen, int n_docs, double* out_sim, int* out_id) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        ct_block_max_multi(idx, w, stride, n_rows, K, dterm, dw, dlen, n_docs, out_sim, out_id); });
}
void launch_ct_argmax(unsigned gx, unsigned gy, unsigned bx, const double* in_sim, const int* in_id, int n_blocks,
                      double* best) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] { ct_argmax(in_sim, in_id, n_blocks, best); });
}
// ct_sequential's grid barrier needs every block at once: the emulator runs one block (gx must be 1)
void launch_ct_sequential(unsigned gx, unsigned gy, unsigned bx, int* idx, double* w, double* c_norm, long long stride,
                          int n_rows0, int K, const int* dterm, const double* dw, const int* dlen, const double* dnorm,
                          int n_docs, double threshold, double* blk_sim, int* blk_id, unsigned int* bar,
                          long long* out_cluster, double* out_sim, unsigned char* out_new, int* out_n_rows) {
    if (gx != 1) return;
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        ct_sequential(idx, w, c_norm, stride, n_rows0, K, dterm, dw, dlen, dnorm, n_docs, threshold, blk_sim, blk_id,
                      bar, out_cluster, out_sim, out_new, out_n_rows); });
}
void launch_ct_scores(unsigned gx, unsigned gy, unsigned bx, const int* idx, const double* w, long long stride,
                      int n_rows, int K, const int* dterm, const double* dw, const int* dlen, double* out) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] { ct_scores(idx, w, stride, n_rows, K, dterm, dw, dlen, out); });
}
void launch_ct_scatter(unsigned gx, unsigned gy, unsigned bx, int* idx, double* w, long long stride, int K,
                       int n_upd, const long long* rows, const int* ri, const double* rw) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] { ct_scatter(idx, w, stride, K, n_upd, rows, ri, rw); });
}
void launch_ct_cand_gather(unsigned gx, unsigned gy, unsigned bx, const int* dterm, const int* dlen, int K,
                           const long long* t_off, const int* t_len, long long n_terms, const int* pool,
                           unsigned int* seen, long long seen_words, const long long* cand_off, int* cand, int* cand_n,
                           int* idx, double* w, long long stride, int upd_row, const int* ui, const double* uw) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        ct_cand_gather(dterm, dlen, K, t_off, t_len, n_terms, pool, seen, seen_words, cand_off, cand, cand_n, idx, w,
                       stride, upd_row, ui, uw); });
}
void launch_ct_cand_block_max(unsigned gx, unsigned gy, unsigned bx, const int* idx, const double* w, long long stride,
                              int K, const int* dterm, const double* dw, const int* dlen, const int* cand,
                              const long long* cand_off, const int* cand_n, unsigned int* seen, long long seen_words,
                              double* out_sim, int* out_id) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        ct_cand_block_max(idx, w, stride, K, dterm, dw, dlen, cand, cand_off, cand_n, seen, seen_words, out_sim,
                          out_id); });
}
void launch_ct_index_update(unsigned gx, unsigned gy, unsigned bx, int* pool, int n_pos, const long long* pos,
                            const int* val, long long* t_off, int* t_len, int n_t, const int* terms,
                            const long long* term_off, const int* term_len) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        ct_index_update(pool, n_pos, pos, val, t_off, t_len, n_t, terms, term_off, term_len); });
}
void emu_block_max(int* idx, double* w, long long stride, int n_rows, int K, const int* dterm, const double* dw,
                   const int* dlen, int B, int upd_row, const int* ui, const double* uw, double* out_sim, int* out_id,
                   double* best) {
    int nb = (n_rows + 255) / 256;
    launch({(unsigned)nb, (unsigned)B, 1}, {256, 1, 1}, [&] {
        ct_block_max(idx, w, stride, n_rows, K, dterm, dw, dlen, upd_row, ui, uw, out_sim, out_id); });
    launch({(unsigned)B, 1, 1}, {256, 1, 1}, [&] { ct_argmax(out_sim, out_id, nb, best); });
}
void emu_scores(const int* idx, const double* w, long long stride, int n_rows, int K, const int* dterm,
                const double* dw, const int* dlen, int B, double* out) {
    launch({(unsigned)((n_rows + 255) / 256), (unsigned)B, 1}, {256, 1, 1}, [&] {
        ct_scores(idx, w, stride, n_rows, K, dterm, dw, dlen, out); });
}
void emu_scatter(int* idx, double* w, long long stride, int K, int n_upd, const long long* rows, const int* ri,
                 const double* rw) {
    long long n = (long long)n_upd * K;
    launch({(unsigned)((n + 255) / 256), 1, 1}, {256, 1, 1}, [&] { ct_scatter(idx, w, stride, K, n_upd, rows, ri, rw); });
}
}
