// Runs the CUDA C of kernels/trie.cu on the CPU: one std::thread per CUDA thread, blocks one after another
// (the approach of ellpack_emu.cpp), for tests/test_trie_cuda_emulated.py through fake_cupy.py.
// Warp votes (__ballot_sync) are emulated per warp: the 32 lanes of a warp write their predicate, meet at the
// warp's barrier, read all 32, and meet again.  The trie kernels call __ballot_sync with the whole warp only
// (a warp leaves a kernel together: one warp per sentence / row), as the real hardware requires.
// Built with -ffp-contract=off, the counterpart of nvcc's --fmad=false; __fadd_rn / __dadd_rn are plain
// IEEE adds in float / double.
#include <barrier>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
struct dim3_ { unsigned x, y, z; };
static thread_local dim3_ threadIdx;
static dim3_ blockIdx, blockDim, gridDim;
static std::barrier<>* g_bar = nullptr;                    // the block's barrier (__syncthreads)
static std::vector<std::unique_ptr<std::barrier<>>> g_warp;  // one barrier per warp of the block
static unsigned g_vote[1024];                              // one slot per thread of the block
static void __syncthreads() { g_bar->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
static unsigned __ballot_sync(unsigned, int pred) {
    const unsigned t = threadIdx.x, w = t >> 5;
    g_vote[t] = pred ? 1u : 0u;
    g_warp[w]->arrive_and_wait();
    unsigned m = 0;
    for (unsigned l = 0; l < 32; l++) m |= g_vote[(w << 5) + l] << l;
    g_warp[w]->arrive_and_wait();
    return m;
}
static inline int __ffs(unsigned x) { return x ? __builtin_ctz(x) + 1 : 0; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline double __dadd_rn(double a, double b) { return a + b; }
#include KERNEL_SOURCE
static void launch(dim3_ grid, dim3_ block, const std::function<void()>& f) {
    gridDim = grid; blockDim = block;
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx = {bx, by, 0};
            std::barrier<> bar(block.x);
            g_bar = &bar;
            g_warp.clear();
            for (unsigned w = 0; w < (block.x + 31) / 32; ++w)
                g_warp.emplace_back(new std::barrier<>(block.x - 32 * w < 32 ? block.x - 32 * w : 32));
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < block.x; ++t)
                ts.emplace_back([&, t] { threadIdx = {t, 0, 0}; f(); });
            for (auto& th : ts) th.join();
        }
}
extern "C" {
// one launcher per kernel: grid (gx, gy), block bx, then the kernel's own arguments (fake_cupy.py calls them)
void launch_score_sentences(unsigned gx, unsigned gy, unsigned bx, const int* keys, const float* prob,
                            const float* bo, const int* child, int order, const int* ids, const long long* offsets,
                            int n_sent, int bos_id, int eos_id, int use_bos, int use_eos,
                            const long long* out_offsets, float* tok_prob, int* tok_len, double* sent_total) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] {
        score_sentences(keys, prob, bo, child, order, ids, offsets, n_sent, bos_id, eos_id, use_bos, use_eos,
                        out_offsets, tok_prob, tok_len, sent_total); });
}
void launch_suffix_entries(unsigned gx, unsigned gy, unsigned bx, const int* keys, const int* child, const int* ids,
                           const long long* offsets, int n_rows, int max_len, int* out) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] { suffix_entries(keys, child, ids, offsets, n_rows, max_len, out); });
}
void launch_fill_distribution(unsigned gx, unsigned gy, unsigned bx, const int* keys, const float* prob,
                              const float* bo, const int* child, int V, int n, const int* ctx, int n_rows,
                              float* out) {
    launch({gx, gy, 1}, {bx, 1, 1}, [&] { fill_distribution(keys, prob, bo, child, V, n, ctx, n_rows, out); });
}
}
