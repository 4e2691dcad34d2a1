// Runs the CUDA C of kernels/wordbreak.cu on the CPU: every thread of a launch in turn (the kernels use no
// shared memory, barriers, warp votes or atomics; each thread writes only its own outputs), for
// tests/emulated/test_wordbreak.py through fake_cupy.py.
#include "emu_serial.h"
#include KERNEL_SOURCE
extern "C" {
// launcher signature: grid (gx, gy), block bx, then the kernel's own arguments (fake_cupy.py calls them)
void launch_wb_segment_starts(unsigned gx, unsigned, unsigned bx, const unsigned char* d, const unsigned char* bound,
                              long long n, const unsigned short* t1, const unsigned char* t2, unsigned char* flags) {
    launch(gx, bx, [&] { wb_segment_starts(d, bound, n, t1, t2, flags); });
}
void launch_wb_count_pieces(unsigned gx, unsigned, unsigned bx, const unsigned char* d, const unsigned char* bound,
                            const unsigned short* t1, const unsigned char* t2, const long long* segs,
                            const long long* seg_end, long long n_segs, long long* counts) {
    launch(gx, bx, [&] { wb_count_pieces(d, bound, t1, t2, segs, seg_end, n_segs, counts); });
}
void launch_wb_write_pieces(unsigned gx, unsigned, unsigned bx, const unsigned char* d, const unsigned char* bound,
                            const unsigned short* t1, const unsigned char* t2, const long long* segs,
                            const long long* seg_end, long long n_segs, const long long* first, long long* ps,
                            long long* pe, unsigned char* pf) {
    launch(gx, bx, [&] { wb_write_pieces(d, bound, t1, t2, segs, seg_end, n_segs, first, ps, pe, pf); });
}
}
