// Runs the CUDA C of kernels/tokenize.cu on the CPU: every thread of a launch in turn (the kernels
// use no shared memory, barriers or atomics; each thread writes only its own output).
#include "emu_serial.h"
#include KERNEL_SOURCE
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
