// Runs the CUDA C of kernels/wordbreak.cu on the CPU: every thread of a launch in turn (the kernels use no
// shared memory, barriers, warp votes or atomics; each thread writes only its own outputs), for
// tests/emulated/test_wordbreak.py through fake_cupy.py.
#include "emu_serial.h"
#include KERNEL_SOURCE
extern "C" {
void launch_wb_code_points(unsigned gx, unsigned, unsigned bx, const unsigned char* d, const long long* starts,
                           const long long* ends, long long n_tokens, long long* out) {
    launch(gx, bx, [&] { wb_code_points(d, starts, ends, n_tokens, out); });
}
// launcher signature: grid (gx, gy), block bx, then the kernel's own arguments (fake_cupy.py calls them)
void launch_wb_segment_starts(unsigned gx, unsigned, unsigned bx, const unsigned char* d, const unsigned char* bound,
                              long long n, const unsigned short* t1, const unsigned char* t2,
                              const unsigned char* pairs, unsigned char* flags) {
    launch(gx, bx, [&] { wb_segment_starts(d, bound, n, t1, t2, pairs, flags); });
}
void launch_wb_count_pieces(unsigned gx, unsigned, unsigned bx, const unsigned char* d, const unsigned char* bound,
                            long long n, const unsigned short* t1, const unsigned char* t2, const unsigned char* flags,
                            long long chunk, long long n_chunks, long long* counts) {
    launch(gx, bx, [&] { wb_count_pieces(d, bound, n, t1, t2, flags, chunk, n_chunks, counts); });
}
void launch_wb_write_pieces(unsigned gx, unsigned, unsigned bx, const unsigned char* d, const unsigned char* bound,
                            long long n, const unsigned short* t1, const unsigned char* t2, const unsigned char* flags,
                            long long chunk, long long n_chunks, const long long* first, long long* ps,
                            long long* pe, unsigned char* pf) {
    launch(gx, bx, [&] { wb_write_pieces(d, bound, n, t1, t2, flags, chunk, n_chunks, first, ps, pe, pf); });
}
}
