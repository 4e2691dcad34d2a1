// Runs the CUDA C of kernels/tokenize.cu on the CPU: every thread of a launch in turn (the kernels
// use no shared memory, barriers or atomics; each thread writes only its own output).
struct dim3_ { unsigned x, y, z; };
static dim3_ threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#include KERNEL_SOURCE
template <class F> static void launch(unsigned grid, unsigned block, F f) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    for (unsigned b = 0; b < grid; ++b)
        for (unsigned t = 0; t < block; ++t) {
            blockIdx = {b, 0, 0};
            threadIdx = {t, 0, 0};
            f();
        }
}
extern "C" {
void launch_blank(unsigned grid, unsigned block, const unsigned char* data, const long long* offsets, long long n_rows,
                  const unsigned char* table, unsigned char* out) {
    launch(grid, block, [&] { tk_blank_separators(data, offsets, n_rows, table, out); });
}
void launch_rows(unsigned grid, unsigned block, const unsigned char* data, const long long* offsets, long long n_rows,
                 const unsigned char* table, unsigned char* flags) {
    launch(grid, block, [&] { tk_rows_containing(data, offsets, n_rows, table, flags); });
}
void launch_hash(unsigned grid, unsigned block, const unsigned char* data, const long long* starts,
                 const long long* ends, long long n_tokens, unsigned long long* out) {
    launch(grid, block, [&] { tk_hash_tokens(data, starts, ends, n_tokens, out); });
}
void launch_equal(unsigned grid, unsigned block, const unsigned char* data, const long long* starts,
                  const long long* ends, const long long* rep, long long n_tokens, unsigned char* same) {
    launch(grid, block, [&] { tk_tokens_equal(data, starts, ends, rep, n_tokens, same); });
}
void launch_utf8(unsigned grid, unsigned block, const unsigned char* data, long long n, unsigned char* invalid) {
    launch(grid, block, [&] { tk_utf8_invalid(data, n, invalid); });
}
}
