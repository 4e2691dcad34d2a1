// Runs the CUDA C of kernels/wordsplit.cu on the CPU: every thread of a launch in turn (the kernels use no
// shared memory, barriers, warp votes or atomics; each thread writes only its own outputs), for
// tests/test_wordsplit_cuda_emulated.py through fake_cupy.py. __dadd_rn is a plain IEEE double add.
#include "emu_serial.h"
static inline double __dadd_rn(double a, double b) { return a + b; }
#include KERNEL_SOURCE
extern "C" {
// launcher signature: grid (gx, gy), block bx, then the kernel's own arguments (fake_cupy.py calls them)
void launch_ws_word_flags(unsigned gx, unsigned, unsigned bx, const unsigned char* data, const unsigned char* bound,
                          long long n, unsigned char* flags) {
    launch(gx, bx, [&] { ws_word_flags(data, bound, n, flags); });
}
void launch_ws_lookup(unsigned gx, unsigned, unsigned bx, const unsigned char* data, const long long* starts,
                      const long long* ends, long long n_words, const unsigned char* vchars, const long long* voff,
                      const int* table, long long mask, int unk_id, int* ids) {
    launch(gx, bx, [&] { ws_lookup(data, starts, ends, n_words, vchars, voff, table, mask, unk_id, ids); });
}
void launch_ws_segment_sum(unsigned gx, unsigned, unsigned bx, const double* x, const long long* seg, long long n_seg,
                           double* out) {
    launch(gx, bx, [&] { ws_segment_sum(x, seg, n_seg, out); });
}
}
