// The prelude shared by the harnesses whose kernels use no shared memory, barriers, warp votes or
// atomics, each thread writing only its own outputs (tokenize_emu.cpp, wordsplit_emu.cpp): the built-in
// index variables, the CUDA qualifiers, and launch(), which runs every thread of a 1-D launch in turn.
#pragma once
struct dim3_ { unsigned x, y, z; };
static dim3_ threadIdx, blockIdx, blockDim, gridDim;
#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
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
