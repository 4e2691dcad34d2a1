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
void launch_bounds_count(unsigned grid, unsigned block, const unsigned char* blanked, const long long* offsets,
                         long long n_rows, long long chunk, long long n_chunks, long long* counts) {
    launch(grid, block, [&] { tk_bounds_count(blanked, offsets, n_rows, chunk, n_chunks, counts); });
}
void launch_bounds_write(unsigned grid, unsigned block, const unsigned char* blanked, const long long* offsets,
                         long long n_rows, long long chunk, long long n_chunks, const long long* first,
                         long long* starts, long long* ends, long long* rows) {
    launch(grid, block, [&] { tk_bounds_write(blanked, offsets, n_rows, chunk, n_chunks, first, starts, ends, rows); });
}
void launch_lines_count(unsigned grid, unsigned block, const unsigned char* buf, long long n, long long chunk,
                        long long n_chunks, long long* kept, long long* newlines) {
    launch(grid, block, [&] { tk_lines_count(buf, n, chunk, n_chunks, kept, newlines); });
}
void launch_lines_write(unsigned grid, unsigned block, const unsigned char* buf, long long n, long long chunk,
                        long long n_chunks, const long long* kept_first, const long long* nl_first, unsigned char* chars,
                        long long* ends) {
    launch(grid, block, [&] { tk_lines_write(buf, n, chunk, n_chunks, kept_first, nl_first, chars, ends); });
}
void launch_code_points(unsigned grid, unsigned block, const unsigned char* data, const long long* starts,
                        const long long* ends, long long n_tokens, long long* n_cp) {
    launch(grid, block, [&] { tk_code_points(data, starts, ends, n_tokens, n_cp); });
}
void launch_rows_high(unsigned grid, unsigned block, const unsigned char* data, const long long* offsets,
                      long long n_rows, unsigned char* flags) {
    launch(grid, block, [&] { tk_rows_high(data, offsets, n_rows, flags); });
}
void launch_utf8(unsigned grid, unsigned block, const unsigned char* data, long long n, unsigned char* invalid) {
    launch(grid, block, [&] { tk_utf8_invalid(data, n, invalid); });
}
}
