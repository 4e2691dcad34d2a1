// The prelude shared by the harnesses that run CUDA C on the CPU with one std::thread per CUDA thread and
// the blocks of a launch one after another (ellpack_emu.cpp, search_emu.cpp): the built-in index
// variables, __syncthreads as a barrier of the block's threads, the CUDA qualifiers, and launch().
// A harness includes it, adds the device functions its kernels need (atomics, bit casts), then the
// kernel source; compiled as C++20 for std::barrier (tests/helpers.py::build_cuda_emulation).
#pragma once
#include <barrier>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>
struct dim3_ { unsigned x, y, z; };
static thread_local dim3_ threadIdx;
static dim3_ blockIdx, blockDim, gridDim;
static std::barrier<>* g_bar = nullptr;
static void __syncthreads() { g_bar->arrive_and_wait(); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__ __restrict
static void launch(dim3_ grid, dim3_ block, const std::function<void()>& f) {
    gridDim = grid; blockDim = block;
    for (unsigned by = 0; by < grid.y; ++by)
        for (unsigned bx = 0; bx < grid.x; ++bx) {
            blockIdx = {bx, by, 0};
            std::barrier<> bar(block.x);
            g_bar = &bar;
            std::vector<std::thread> ts;
            for (unsigned t = 0; t < block.x; ++t)
                ts.emplace_back([&, t] { threadIdx = {t, 0, 0}; f(); });
            for (auto& th : ts) th.join();
        }
}
