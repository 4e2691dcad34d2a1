// Lucene's StandardTokenizer over UTF-8 bytes (kernels/wordbreak.py; its numba twins mirror these functions
// statement for statement).
//
// Code point classes: one byte a code point from a two-level table, t2[(t1[cp >> 7] << 7) | (cp & 127)]:
// bits 0-4 the Word_Break value (the regex module's RE_WBREAK_* numbering), bit 5 a token character, bit 6
// Extended_Pictographic, bit 7 Line_Break=Complex_Context. WB_NONE (31) stands for "outside the text".
// bound[q] == 1 where a row starts at byte q (and at n): nothing before a row start is read as its context.
//
// wb_segment_starts: a thread a byte (grid-stride): flags[i] = 1 where the regex module's (?w)\b holds before
//   the code point at byte i inside its row (unicode_at_default_boundary of _regex.c: WB1-WB16, no WB5a);
//   between two ASCII bytes a and b inside a row, pairs[(a << 7) | b] decides it (WB_PAIR_UNDECIDED: the full
//   rules; ascii_pairs() of wordbreak.py makes the table from those rules).
// wb_count_pieces / wb_write_pieces: a thread a chunk of `chunk` bytes (grid-stride over chunks): the pieces
//   standard_tokens makes of each segment that starts in the chunk (flags from wb_segment_starts; a segment
//   runs to the next flag or n), counted, then written from first[c]; a count of -1: the nested scans needed
//   more than WB_DEPTH levels. A piece is (start, end, 1 when it is a run of South East Asian letters). An ASCII
//   segment of at most 255 bytes is decided in one pass over its bytes (wb_ascii_pieces) when it can be.
// wb_code_points: a thread a token: its code points (to cut joined South East Asian runs at 255).

#define WB_DEPTH 32
#define WB_MAX_TOKEN 255

enum {
    WB_OTHER, WB_LF, WB_NEWLINE, WB_CR, WB_WSEG, WB_DQUOTE, WB_SQUOTE, WB_MIDNUM, WB_MIDNUMLET, WB_NUMERIC,
    WB_MIDLETTER, WB_ALETTER, WB_EXTENDNUMLET, WB_FORMAT, WB_EXTEND, WB_HEBREW, WB_ZWJ, WB_KATAKANA, WB_RI,
    WB_NONE = 31
};
enum { WB_TOKEN = 32, WB_PICT = 64, WB_SEA = 128 };
enum { WB_PAIR_NO_BREAK, WB_PAIR_BREAK, WB_PAIR_UNDECIDED };

extern "C" {

__device__ __forceinline__ long long wb_step(const unsigned char* d, long long pos, long long end) {
    unsigned char b = d[pos];
    long long n = 1;
    if (b >= 0xF0 && b < 0xF8) n = 4;
    else if (b >= 0xE0 && b < 0xF0) n = 3;
    else if (b >= 0xC0 && b < 0xE0) n = 2;
    if (pos + n > end) n = end - pos;
    return n;
}

__device__ __forceinline__ long long wb_prev(const unsigned char* d, long long pos, long long lo) {
    long long q = pos - 1;
    while (q > lo && (d[q] & 0xC0) == 0x80) --q;
    return q;
}

__device__ __forceinline__ int wb_class(const unsigned char* d, long long pos, long long end,
                                        const unsigned short* t1, const unsigned char* t2) {
    long long b0 = d[pos];
    if (b0 < 0x80) return t2[((long long)t1[0] << 7) | b0];
    long long n, cp;
    if (b0 >= 0xC0 && b0 < 0xE0) { n = 2; cp = b0 & 0x1F; }
    else if (b0 >= 0xE0 && b0 < 0xF0) { n = 3; cp = b0 & 0x0F; }
    else if (b0 >= 0xF0 && b0 < 0xF8) { n = 4; cp = b0 & 0x07; }
    else return 0;
    if (pos + n > end) return 0;
    for (long long k = 1; k < n; ++k) cp = (cp << 6) | (long long)(d[pos + k] & 0x3F);
    if (cp >= 0x110000) return 0;
    return t2[((long long)t1[cp >> 7] << 7) | (cp & 127)];
}

__device__ __forceinline__ bool wb_efz(int w) { return w == WB_EXTEND || w == WB_FORMAT || w == WB_ZWJ; }
__device__ __forceinline__ bool wb_ahl(int w) { return w == WB_ALETTER || w == WB_HEBREW; }
__device__ __forceinline__ bool wb_midnumletq(int w) { return w == WB_MIDNUMLET || w == WB_SQUOTE; }

// Word_Break of the first character after pos that is not Extend / Format / ZWJ (WB_NONE past hi)
__device__ int wb_ahead(const unsigned char* d, const unsigned char* bound, long long hi, long long pos,
                        const unsigned short* t1, const unsigned char* t2) {
    while (true) {
        pos += wb_step(d, pos, hi);
        if (pos >= hi || bound[pos]) return WB_NONE;
        int w = wb_class(d, pos, hi, t1, t2) & 31;
        if (!wb_efz(w)) return w;
    }
}

// Word_Break of the last character before pos that is not Extend / Format / ZWJ (WB_NONE before lo)
__device__ int wb_behind(const unsigned char* d, const unsigned char* bound, long long lo, long long hi,
                         long long pos, const unsigned short* t1, const unsigned char* t2) {
    while (true) {
        if (pos <= lo || bound[pos]) return WB_NONE;
        pos = wb_prev(d, pos, lo);
        int w = wb_class(d, pos, hi, t1, t2) & 31;
        if (!wb_efz(w)) return w;
    }
}

// whether (?w)\b holds at byte p of the text d[lo:hi]
__device__ bool wb_is_break(const unsigned char* d, const unsigned char* bound, long long lo, long long hi,
                            long long p, const unsigned short* t1, const unsigned char* t2) {
    if (p <= lo || p >= hi || bound[p]) return true;  // WB1, WB2
    long long lp = wb_prev(d, p, lo);
    int lc = wb_class(d, lp, hi, t1, t2);
    int rc = wb_class(d, p, hi, t1, t2);
    int lw = lc & 31;
    int rw = rc & 31;
    if (lw == WB_CR && rw == WB_LF) return false;  // WB3
    if (lw == WB_NEWLINE || lw == WB_CR || lw == WB_LF || rw == WB_NEWLINE || rw == WB_CR || rw == WB_LF)
        return true;  // WB3a, WB3b
    if (lw == WB_ZWJ && (rc & WB_PICT) != 0) return false;  // WB3c
    if (lw == WB_WSEG && rw == WB_WSEG) return false;      // WB3d
    if (wb_efz(rw)) return false;                          // WB4
    while (wb_efz(lw)) {
        if (lp <= lo || bound[lp]) {
            lw = WB_NONE;
        } else {
            lp = wb_prev(d, lp, lo);
            lw = wb_class(d, lp, hi, t1, t2) & 31;
        }
    }
    if (wb_ahl(lw) && wb_ahl(rw)) return false;  // WB5
    if (wb_ahl(lw) && (rw == WB_MIDLETTER || wb_midnumletq(rw)) && wb_ahl(wb_ahead(d, bound, hi, p, t1, t2)))
        return false;  // WB6
    if ((lw == WB_MIDLETTER || wb_midnumletq(lw)) && wb_ahl(rw) && wb_ahl(wb_behind(d, bound, lo, hi, lp, t1, t2)))
        return false;  // WB7
    if (lw == WB_HEBREW && rw == WB_SQUOTE) return false;  // WB7a
    if (lw == WB_HEBREW && rw == WB_DQUOTE && wb_ahead(d, bound, hi, p, t1, t2) == WB_HEBREW) return false;  // WB7b
    if (lw == WB_DQUOTE && rw == WB_HEBREW && wb_behind(d, bound, lo, hi, lp, t1, t2) == WB_HEBREW)
        return false;  // WB7c
    if ((lw == WB_NUMERIC || wb_ahl(lw)) && rw == WB_NUMERIC) return false;  // WB8, WB9
    if (lw == WB_NUMERIC && wb_ahl(rw)) return false;                        // WB10
    if ((lw == WB_MIDNUM || wb_midnumletq(lw)) && rw == WB_NUMERIC &&
        wb_behind(d, bound, lo, hi, lp, t1, t2) == WB_NUMERIC)
        return false;  // WB11
    if (lw == WB_NUMERIC && (rw == WB_MIDNUM || wb_midnumletq(rw)) && wb_ahead(d, bound, hi, p, t1, t2) == WB_NUMERIC)
        return false;  // WB12
    if (lw == WB_KATAKANA && rw == WB_KATAKANA) return false;  // WB13
    if ((wb_ahl(lw) || lw == WB_NUMERIC || lw == WB_KATAKANA || lw == WB_EXTENDNUMLET) && rw == WB_EXTENDNUMLET)
        return false;  // WB13a
    if (lw == WB_EXTENDNUMLET && (wb_ahl(rw) || rw == WB_NUMERIC || rw == WB_KATAKANA)) return false;  // WB13b
    if (rw == WB_RI) {  // WB15, WB16: an odd number of regional indicators before
        bool pair = true;
        int w = lw;
        long long q = lp;
        while (true) {
            if (w == WB_RI) pair = !pair;
            else if (!wb_efz(w)) break;
            if (q <= lo || bound[q]) break;
            q = wb_prev(d, q, lo);
            w = wb_class(d, q, hi, t1, t2) & 31;
        }
        if (!pair) return false;
    }
    return true;  // WB999
}

__global__ void wb_segment_starts(const unsigned char* __restrict__ d, const unsigned char* __restrict__ bound,
                                  long long n, const unsigned short* __restrict__ t1,
                                  const unsigned char* __restrict__ t2, const unsigned char* __restrict__ pairs,
                                  unsigned char* __restrict__ flags) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        long long b = d[i];
        if ((b & 0xC0) == 0x80) {
            flags[i] = 0;
            continue;
        }
        if (b < 0x80 && i > 0 && bound[i] == 0 && d[i - 1] < 0x80) {
            int v = pairs[((long long)d[i - 1] << 7) | b];
            if (v != WB_PAIR_UNDECIDED) {
                flags[i] = (unsigned char)v;
                continue;
            }
        }
        flags[i] = wb_is_break(d, bound, 0, n, i, t1, t2) ? 1 : 0;
    }
}

__device__ bool wb_has_token(const unsigned char* d, long long s, long long e, const unsigned short* t1,
                             const unsigned char* t2) {
    while (s < e) {
        if (wb_class(d, s, e, t1, t2) & WB_TOKEN) return true;
        s += wb_step(d, s, e);
    }
    return false;
}

// a South East Asian letter followed by such letters and marks only
__device__ bool wb_is_sea(const unsigned char* d, long long s, long long e, const unsigned short* t1,
                          const unsigned char* t2) {
    if ((wb_class(d, s, e, t1, t2) & WB_SEA) == 0) return false;
    s += wb_step(d, s, e);
    while (s < e) {
        int c = wb_class(d, s, e, t1, t2);
        if ((c & WB_SEA) == 0 && !wb_efz(c & 31)) return false;
        s += wb_step(d, s, e);
    }
    return true;
}

__device__ long long wb_n_code_points(const unsigned char* d, long long s, long long e) {
    long long n = 0;
    while (s < e) {
        s += wb_step(d, s, e);
        ++n;
    }
    return n;
}

__device__ long long wb_next_break(const unsigned char* d, const unsigned char* bound, long long lo, long long hi,
                                   long long s, const unsigned short* t1, const unsigned char* t2) {
    long long q = s + wb_step(d, s, hi);
    while (q < hi && !wb_is_break(d, bound, lo, hi, q, t1, t2)) q += wb_step(d, q, hi);
    return q;
}

__device__ __forceinline__ void wb_emit(long long* ps, long long* pe, unsigned char* pf, long long k, long long s,
                                        long long e, unsigned char sea, bool fill) {
    if (fill) {
        ps[k] = s;
        pe[k] = e;
        pf[k] = sea;
    }
}

// the pieces of the segment d[a:b], written from k when fill; the next k, or -1 past WB_DEPTH nested scans
__device__ long long wb_pieces(const unsigned char* d, const unsigned char* bound, const unsigned short* t1,
                               const unsigned char* t2, long long a, long long b, long long* ps, long long* pe,
                               unsigned char* pf, long long k, bool fill) {
    long long los[WB_DEPTH], his[WB_DEPTH];
    int depth = 0;
    long long pos = a;
    while (true) {
        long long s, e;
        if (depth == 0) {
            if (pos >= b) return k;
            s = a;
            e = b;
        } else {
            long long lo = los[depth - 1];
            long long hi = his[depth - 1];
            if (pos >= hi) {  // this scan is done: its parent goes on after the segment it was scanning
                --depth;
                continue;
            }
            s = pos;
            e = wb_next_break(d, bound, lo, hi, s, t1, t2);
        }
        long long nlo = -1;
        if (!wb_has_token(d, s, e, t1, t2)) {
            pos = e;
        } else if ((wb_class(d, s, e, t1, t2) & WB_TOKEN) == 0 && (wb_class(d, s, e, t1, t2) & 31) != WB_EXTENDNUMLET) {
            nlo = s + wb_step(d, s, e);  // no token starts here: the rest of the segment is scanned again
        } else if (wb_is_sea(d, s, e, t1, t2)) {
            wb_emit(ps, pe, pf, k, s, e, 1, fill);
            ++k;
            pos = e;
        } else {
            long long left = wb_n_code_points(d, s, e);
            if (left <= WB_MAX_TOKEN) {
                wb_emit(ps, pe, pf, k, s, e, 0, fill);
                ++k;
                pos = e;
            } else {  // the first segment of the scanner's buffer of 255 code points, until the rest fits
                long long cur = s;
                while (left > WB_MAX_TOKEN) {
                    long long lim = cur;
                    for (int i = 0; i < WB_MAX_TOKEN; ++i) lim += wb_step(d, lim, e);
                    long long h = wb_next_break(d, bound, cur, lim, cur, t1, t2);
                    if (wb_has_token(d, cur, h, t1, t2)) {
                        wb_emit(ps, pe, pf, k, cur, h, 0, fill);
                        ++k;
                    }
                    left -= wb_n_code_points(d, cur, h);
                    cur = h;
                }
                nlo = cur;
            }
        }
        if (nlo >= 0) {  // scan d[nlo:e]; a scan that ends where this one does replaces it
            if (depth > 0 && his[depth - 1] == e) {
                los[depth - 1] = nlo;
            } else {
                if (depth == WB_DEPTH) return -1;
                los[depth] = nlo;
                his[depth] = e;
                ++depth;
            }
            pos = nlo;
        }
    }
}

// the pieces wb_pieces makes of the ASCII segment d[a:b] of at most 255 bytes: 0 or 1 (d[a:b] itself), or -1
// when it needs the full scan (its first character starts no token, a later one is a token character);
// base: the ASCII block of t2
__device__ __forceinline__ int wb_ascii_pieces(const unsigned char* d, const unsigned char* t2, long long base,
                                               long long a, long long b) {
    int c0 = t2[base | d[a]];
    if ((c0 & WB_SEA) != 0) return -1;
    bool tok = (c0 & WB_TOKEN) != 0;
    for (long long q = a + 1; !tok && q < b; ++q) tok = (t2[base | d[q]] & WB_TOKEN) != 0;
    if (!tok) return 0;
    if ((c0 & WB_TOKEN) != 0 || (c0 & 31) == WB_EXTENDNUMLET) return 1;
    return -1;
}

// the pieces of the segments that start in chunk c, written from k when fill; the next k, or -1
__device__ long long wb_chunk_pieces(const unsigned char* d, const unsigned char* bound, long long n,
                                     const unsigned short* t1, const unsigned char* t2, const unsigned char* flags,
                                     long long chunk, long long c, long long* ps, long long* pe, unsigned char* pf,
                                     long long k, bool fill) {
    long long stop = (c + 1) * chunk < n ? (c + 1) * chunk : n;
    long long base = (long long)t1[0] << 7;
    for (long long i = c * chunk; i < stop; ++i) {
        if (flags[i] == 0) continue;
        long long j = i + 1;
        int high = d[i];
        while (j < n && flags[j] == 0) high |= d[j++];
        if (high < 0x80 && j - i <= WB_MAX_TOKEN) {
            int m = wb_ascii_pieces(d, t2, base, i, j);
            if (m >= 0) {
                if (m) wb_emit(ps, pe, pf, k, i, j, 0, fill);
                k += m;
                continue;
            }
        }
        k = wb_pieces(d, bound, t1, t2, i, j, ps, pe, pf, k, fill);
        if (k < 0) break;
    }
    return k;
}

__global__ void wb_count_pieces(const unsigned char* __restrict__ d, const unsigned char* __restrict__ bound,
                                long long n, const unsigned short* __restrict__ t1,
                                const unsigned char* __restrict__ t2, const unsigned char* __restrict__ flags,
                                long long chunk, long long n_chunks, long long* __restrict__ counts) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks; c += step)
        counts[c] = wb_chunk_pieces(d, bound, n, t1, t2, flags, chunk, c, nullptr, nullptr, nullptr, 0, false);
}

__global__ void wb_write_pieces(const unsigned char* __restrict__ d, const unsigned char* __restrict__ bound,
                                long long n, const unsigned short* __restrict__ t1,
                                const unsigned char* __restrict__ t2, const unsigned char* __restrict__ flags,
                                long long chunk, long long n_chunks, const long long* __restrict__ first,
                                long long* __restrict__ ps, long long* __restrict__ pe,
                                unsigned char* __restrict__ pf) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x; c < n_chunks; c += step)
        wb_chunk_pieces(d, bound, n, t1, t2, flags, chunk, c, ps, pe, pf, first[c], true);
}

__global__ void wb_code_points(const unsigned char* __restrict__ d, const long long* __restrict__ starts,
                               const long long* __restrict__ ends, long long n_tokens, long long* __restrict__ out) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long k = (long long)blockIdx.x * blockDim.x + threadIdx.x; k < n_tokens; k += step)
        out[k] = wb_n_code_points(d, starts[k], ends[k]);
}

}  // extern "C"
