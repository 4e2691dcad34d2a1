// Word boundaries over UTF-8 bytes, for cutext's GPU tokenizer (kernels/tokenize.py).
//
// One thread per byte of a strings column's character buffer (grid-stride loop).  Row r owns bytes
// [offsets[r], offsets[r + 1]); a thread finds its row by binary search over the offsets, except for
// an ASCII byte, which is its own code point whatever its row (only the table decides it).  Decoding
// follows the numba twin `_decode` of kernels/tokenize.py exactly: a lead byte followed by the right
// number of continuation bytes inside its row is one code point, anything else is an invalid byte
// (a separator, never a word character, never flagged).
//
// Every byte of a valid sequence knows its code point without a sequential scan: a non-continuation
// byte starts a sequence of its own, and a continuation byte belongs to the nearest
// non-continuation byte at most three bytes before it (inside its row) when that byte decodes to a
// sequence long enough to cover it; otherwise it is a stray byte, invalid on its own.  This is what
// the twin's left-to-right scan does, since a valid sequence never contains a non-continuation byte.
//
// Word table kinds: 0 separator, 1 word (L*, N*, Pc), 2 mark (M*).  A mark takes the kind of the
// code point before it (UAX #29 WB4): the thread of a mark walks back over the preceding marks of
// its row to the first non-mark unit, which decides (a row start or an invalid byte: separator).

extern "C" {

__device__ __forceinline__ long long tk_row_of(const long long* offsets, long long n_rows, long long i) {
    // the last row r with offsets[r] <= i (empty rows before it are skipped)
    long long lo = 0, hi = n_rows - 1;
    while (lo < hi) {
        long long mid = lo + (hi - lo + 1) / 2;
        if (offsets[mid] <= i) lo = mid; else hi = mid - 1;
    }
    return lo;
}

// code point of the sequence at i (row ends at `end`) and its byte length; -1 and 1 when invalid
__device__ __forceinline__ int tk_decode(const unsigned char* d, long long i, long long end, int* len) {
    unsigned int b0 = d[i];
    *len = 1;
    if (b0 < 0x80u) return (int)b0;
    int n;
    int cp;
    if ((b0 >> 5) == 0x6u) { n = 2; cp = (int)(b0 & 0x1Fu); }
    else if ((b0 >> 4) == 0xEu) { n = 3; cp = (int)(b0 & 0x0Fu); }
    else if ((b0 >> 3) == 0x1Eu) { n = 4; cp = (int)(b0 & 0x07u); }
    else return -1;
    if (i + n > end) return -1;
    for (int k = 1; k < n; ++k) {
        unsigned int b = d[i + k];
        if ((b >> 6) != 0x2u) return -1;
        cp = (cp << 6) | (int)(b & 0x3Fu);
    }
    *len = n;
    return cp;
}

// code point that byte i is part of (-1 for an invalid byte); *lead: whether i starts it
__device__ __forceinline__ int tk_code_point_at(const unsigned char* d, long long start, long long end,
                                                long long i, int* lead) {
    int len;
    if ((d[i] & 0xC0u) != 0x80u) {
        *lead = 1;
        return tk_decode(d, i, end, &len);
    }
    *lead = 0;
    long long stop = i - 3 > start ? i - 3 : start;
    for (long long k = i - 1; k >= stop; --k) {
        if ((d[k] & 0xC0u) != 0x80u) {
            int cp = tk_decode(d, k, end, &len);
            return (cp >= 0 && k + len > i) ? cp : -1;
        }
    }
    return -1;
}

// the unit (valid sequence or invalid byte) that ends just before u, where u starts a valid
// sequence (so d[u] is not a continuation byte and a sequence covering u - 1 ends exactly at u);
// returns its code point (-1 invalid) and its first byte in *from
__device__ __forceinline__ int tk_prev_unit(const unsigned char* d, long long start, long long end, long long u,
                                           long long* from) {
    long long i = u - 1;
    int lead;
    int cp = tk_code_point_at(d, start, end, i, &lead);
    if (lead || cp < 0) { *from = i; return cp; }
    long long k = i - 1;
    while ((d[k] & 0xC0u) == 0x80u) --k;  // the covering lead byte (found by tk_code_point_at)
    *from = k;
    return cp;
}

// kind (0 separator, 1 word, 2 mark) of a code point (-1: invalid byte -> separator)
__device__ __forceinline__ int tk_kind(const unsigned char* table, int cp) {
    return (cp >= 0 && cp < 0x110000) ? (int)table[cp] : 0;
}

__device__ __forceinline__ bool tk_in(const unsigned char* table, int cp) {
    return cp >= 0 && cp < 0x110000 && table[cp] != 0;
}

// out[i] = data[i] for the bytes of token code points (kind 1, or kind 2 after a kind-1 code point,
// marks between), ' ' for every other byte of the rows; bytes outside [offsets[0], offsets[n_rows]) are not written.
__global__ void tk_blank_separators(const unsigned char* __restrict__ data, const long long* __restrict__ offsets,
                                    long long n_rows, const unsigned char* __restrict__ table,
                                    unsigned char* __restrict__ out) {
    if (n_rows <= 0) return;
    long long base = offsets[0];
    long long n = offsets[n_rows] - base;
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += step) {
        long long i = base + t;
        unsigned char b = data[i];
        if (b < 0x80u) {  // ASCII: its own code point, never a mark, whatever its row
            out[i] = table[b] == 1 ? b : (unsigned char)' ';
            continue;
        }
        long long r = tk_row_of(offsets, n_rows, i);
        long long start = offsets[r], end = offsets[r + 1];
        int lead;
        int cp = tk_code_point_at(data, start, end, i, &lead);
        int kind = tk_kind(table, cp);
        if (kind == 2) {
            // the unit's first byte, then back over marks to the base that decides
            long long u = i;
            while ((data[u] & 0xC0u) == 0x80u) --u;
            while (kind == 2) {
                if (u <= start) { kind = 0; break; }
                long long from;
                kind = tk_kind(table, tk_prev_unit(data, start, end, u, &from));
                u = from;
            }
        }
        out[i] = kind == 1 ? data[i] : (unsigned char)' ';
    }
}

// flags[r] = 1 when row r holds a code point with table[cp] == 1 (flags zeroed by the caller)
__global__ void tk_rows_containing(const unsigned char* __restrict__ data, const long long* __restrict__ offsets,
                                   long long n_rows, const unsigned char* __restrict__ table,
                                   unsigned char* __restrict__ flags) {
    if (n_rows <= 0) return;
    long long base = offsets[0];
    long long n = offsets[n_rows] - base;
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += step) {
        long long i = base + t;
        unsigned char b = data[i];
        if (b < 0x80u ? table[b] == 0 : (b & 0xC0u) == 0x80u) continue;  // unflagged ASCII; continuation
        long long r = tk_row_of(offsets, n_rows, i);                      // bytes: their lead byte decides
        int len;
        int cp = tk_decode(data, i, offsets[r + 1], &len);
        if (tk_in(table, cp)) flags[r] = 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Device encode (stages/gputext.py): one thread per token; token k is data[starts[k], ends[k]).

// 64-bit FNV-1a over the token's bytes, then the splitmix64 finalizer (avalanche of every bit);
// the twin is kernels/tokenize.py::_hash_cpu.  Equal bytes give equal hashes; unequal tokens
// that collide are caught by tk_tokens_equal.
__global__ void tk_hash_tokens(const unsigned char* __restrict__ data, const long long* __restrict__ starts,
                               const long long* __restrict__ ends, long long n_tokens,
                               unsigned long long* __restrict__ out) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n_tokens; k += step) {
        unsigned long long h = 14695981039346656037ull;
        for (long long i = starts[k]; i < ends[k]; ++i) {
            h ^= (unsigned long long)data[i];
            h *= 1099511628211ull;
        }
        h ^= (unsigned long long)(ends[k] - starts[k]);
        h += 0x9E3779B97F4A7C15ull;
        h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9ull;
        h = (h ^ (h >> 27)) * 0x94D049BB133111EBull;
        out[k] = h ^ (h >> 31);
    }
}

// same[k] = 1 when token k's bytes equal the bytes of token rep[k], else 0
__global__ void tk_tokens_equal(const unsigned char* __restrict__ data, const long long* __restrict__ starts,
                                const long long* __restrict__ ends, const long long* __restrict__ rep,
                                long long n_tokens, unsigned char* __restrict__ same) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n_tokens; k += step) {
        long long a = starts[k], n = ends[k] - a, b = starts[rep[k]];
        unsigned char eq = (ends[rep[k]] - b) == n ? 1 : 0;
        for (long long i = 0; eq && i < n; ++i) eq = data[a + i] == data[b + i];
        same[k] = eq;
    }
}

// ---------------------------------------------------------------------------------------------
// Strict UTF-8 validation (the device lines reader): Unicode 15 Table 3-7, what Python's decoder
// accepts (no overlongs, no surrogates, nothing above U+10FFFF).  One thread per byte: a lead byte
// checks its whole sequence, a continuation byte checks that the nearest non-continuation byte at
// most three bytes before it starts a sequence long enough to cover it.  *invalid is set to 1 when
// any byte is invalid (left alone otherwise: the caller zeroes it).  Twin: _utf8_invalid_cpu.

__device__ __forceinline__ int tk_strict_len(unsigned int b) {
    if (b < 0x80u) return 1;
    if (b >= 0xC2u && b <= 0xDFu) return 2;
    if (b >= 0xE0u && b <= 0xEFu) return 3;
    if (b >= 0xF0u && b <= 0xF4u) return 4;
    return 0;  // a continuation byte, C0, C1, F5..FF
}

__global__ void tk_utf8_invalid(const unsigned char* __restrict__ data, long long n,
                                unsigned char* __restrict__ invalid) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        unsigned int b = data[i];
        if (b < 0x80u) continue;
        bool bad = false;
        if ((b & 0xC0u) == 0x80u) {
            long long k = i - 1;
            while (k >= 0 && k > i - 4 && (data[k] & 0xC0u) == 0x80u) --k;
            bad = k < 0 || (data[k] & 0xC0u) == 0x80u || k + tk_strict_len(data[k]) <= i;
        } else {
            int len = tk_strict_len(b);
            if (len == 0 || i + len > n) {
                bad = true;
            } else {
                unsigned int c = data[i + 1];
                unsigned int lo = 0x80u, hi = 0xBFu;
                if (b == 0xE0u) lo = 0xA0u;
                else if (b == 0xEDu) hi = 0x9Fu;
                else if (b == 0xF0u) lo = 0x90u;
                else if (b == 0xF4u) hi = 0x8Fu;
                bad = c < lo || c > hi;
                for (int j = 2; j < len && !bad; ++j) bad = (data[i + j] & 0xC0u) != 0x80u;
            }
        }
        if (bad) invalid[0] = 1;
    }
}

// ---------------------------------------------------------------------------------------------
// Token boundaries of a blanked buffer (tk_blank_separators' output): a token is a maximal run of
// bytes other than ' ' inside one row.  Two passes over chunks of `chunk` bytes of [lo, hi), one
// thread a chunk (grid-stride): tk_bounds_count counts the tokens that start in each chunk,
// the caller scans the counts, tk_bounds_write writes each token's start, end and row at its place.
// A thread finds the row of its chunk's first byte by binary search and then walks the row starts
// forward, so byte i starts a row when offsets[r] == i for its row r (the last row with
// offsets[r] <= i; empty rows are skipped).  Twin: kernels/tokenize.py::_bounds_cpu.

__device__ __forceinline__ bool tk_starts_token(const unsigned char* b, long long lo, long long i, bool row_start) {
    return b[i] != ' ' && (i == lo || row_start || b[i - 1] == ' ');
}

__global__ void tk_bounds_count(const unsigned char* __restrict__ blanked, const long long* __restrict__ offsets,
                                long long n_rows, long long chunk, long long n_chunks,
                                long long* __restrict__ counts) {
    long long lo = offsets[0], hi = offsets[n_rows];
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks; c += step) {
        long long a = lo + c * chunk, e = a + chunk < hi ? a + chunk : hi;
        long long r = tk_row_of(offsets, n_rows, a);
        long long n = 0;
        for (long long i = a; i < e; ++i) {
            while (r + 1 < n_rows && offsets[r + 1] <= i) ++r;
            n += tk_starts_token(blanked, lo, i, offsets[r] == i) ? 1 : 0;
        }
        counts[c] = n;
    }
}

// first[c]: tokens starting before chunk c (the exclusive scan of tk_bounds_count's counts)
__global__ void tk_bounds_write(const unsigned char* __restrict__ blanked, const long long* __restrict__ offsets,
                                long long n_rows, long long chunk, long long n_chunks,
                                const long long* __restrict__ first, long long* __restrict__ starts,
                                long long* __restrict__ ends, long long* __restrict__ rows) {
    long long lo = offsets[0], hi = offsets[n_rows];
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks; c += step) {
        long long a = lo + c * chunk, e = a + chunk < hi ? a + chunk : hi;
        long long r = tk_row_of(offsets, n_rows, a);
        long long k = first[c];
        for (long long i = a; i < e; ++i) {
            while (r + 1 < n_rows && offsets[r + 1] <= i) ++r;
            if (!tk_starts_token(blanked, lo, i, offsets[r] == i)) continue;
            long long stop = offsets[r + 1];  // the next row start (> i), or hi
            long long j = i + 1;
            while (j < stop && blanked[j] != ' ') ++j;
            starts[k] = i;
            ends[k] = j;
            rows[k] = r;
            ++k;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Lines of a read buffer (the device lines reader): every '\n', and a '\r' just before one, is
// dropped; line L ends where the L-th '\n' was.  Two passes over chunks of `chunk` bytes, one thread
// a chunk: tk_lines_count counts the kept bytes and the newlines of each chunk, the caller scans
// both, tk_lines_write copies the kept bytes to their places and writes the end offset of each line
// (ends[L] = kept bytes before the L-th newline).  Twin: kernels/tokenize.py::_lines_cpu.

__device__ __forceinline__ bool tk_dropped_cr(const unsigned char* buf, long long n, long long i) {
    return buf[i] == '\r' && i + 1 < n && buf[i + 1] == '\n';
}

__global__ void tk_lines_count(const unsigned char* __restrict__ buf, long long n, long long chunk, long long n_chunks,
                               long long* __restrict__ kept, long long* __restrict__ newlines) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks; c += step) {
        long long a = c * chunk, e = a + chunk < n ? a + chunk : n;
        long long k = 0, nl = 0;
        for (long long i = a; i < e; ++i) {
            if (buf[i] == '\n') ++nl;
            else if (!tk_dropped_cr(buf, n, i)) ++k;
        }
        kept[c] = k;
        newlines[c] = nl;
    }
}

// kept_first[c], nl_first[c]: kept bytes and newlines before chunk c (exclusive scans of the counts)
__global__ void tk_lines_write(const unsigned char* __restrict__ buf, long long n, long long chunk, long long n_chunks,
                               const long long* __restrict__ kept_first, const long long* __restrict__ nl_first,
                               unsigned char* __restrict__ chars, long long* __restrict__ ends) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks; c += step) {
        long long a = c * chunk, e = a + chunk < n ? a + chunk : n;
        long long k = kept_first[c], nl = nl_first[c];
        for (long long i = a; i < e; ++i) {
            unsigned char b = buf[i];
            if (b == '\n') ends[nl++] = k;
            else if (!tk_dropped_cr(buf, n, i)) chars[k++] = b;
        }
    }
}

// n_cp[k] = code points of token k (its bytes that are not UTF-8 continuation bytes; tokens hold
// only valid sequences), for the length filters of the term map.  Twin: _code_points_cpu.
__global__ void tk_code_points(const unsigned char* __restrict__ data, const long long* __restrict__ starts,
                               const long long* __restrict__ ends, long long n_tokens, long long* __restrict__ n_cp) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n_tokens; k += step) {
        long long n = 0;
        for (long long i = starts[k]; i < ends[k]; ++i) n += (data[i] & 0xC0u) != 0x80u ? 1 : 0;
        n_cp[k] = n;
    }
}

// flags[r] = 1 when row r holds a byte >= 0x80 (flags zeroed by the caller): one thread per byte,
// the row found by binary search for those bytes only.  Twin: kernels/tokenize.py::_rows_high_cpu.
__global__ void tk_rows_high(const unsigned char* __restrict__ data, const long long* __restrict__ offsets,
                             long long n_rows, unsigned char* __restrict__ flags) {
    if (n_rows <= 0) return;
    long long base = offsets[0];
    long long n = offsets[n_rows] - base;
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += step) {
        long long i = base + t;
        if (data[i] >= 0x80u) flags[tk_row_of(offsets, n_rows, i)] = 1;
    }
}

}  // extern "C"
