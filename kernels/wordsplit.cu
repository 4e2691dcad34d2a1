// Words of a strings column and their vocabulary ids, for the n-gram LM's GPU text path
// (kernels/wordsplit.py; the numba twins there mirror these kernels statement for statement).
//
// A word is a maximal run of bytes that are not ASCII white space (space, \t, \n, \v, \f, \r: what
// KenLM's Python module splits on, bytes.split(), and pyarrow's ascii_split_whitespace). Words never
// cross a row boundary. Words are bytes: no decoding, no case folding (KenLM matches bytes).
//
// ws_word_flags: one thread per byte (grid-stride). bound[i] = 1 where a row starts at byte i
//   (bound[n] = 1); flags[i] bit 0: a word starts at byte i, bit 1: a word ends at byte i (inclusive).
// ws_lookup: one thread per word. The vocabulary is an open-addressing hash table (linear probing,
//   FNV-1a 64-bit hash of the bytes, power-of-two size, -1 = empty slot) over the model's words;
//   a candidate is accepted only when its bytes equal the word's bytes (byte-exact match). A word that
//   is not found gets unk_id.
// ws_segment_sum: one thread per segment: out[s] = x[seg[s]] + ... + x[seg[s + 1] - 1], added in index
//   order from 0.0 (numpy's bincount order, so per-document sums are those of the CPU path, bit for bit).

extern "C" {

__device__ __forceinline__ bool ws_space(unsigned char c) { return c == 32 || (c >= 9 && c <= 13); }

__device__ __forceinline__ unsigned long long ws_hash(const unsigned char* p, long long len) {
    unsigned long long h = 14695981039346656037ULL;  // FNV-1a 64 offset basis
    for (long long k = 0; k < len; ++k) {
        h ^= (unsigned long long)p[k];
        h *= 1099511628211ULL;                         // FNV 64 prime
    }
    return h;
}

__global__ void ws_word_flags(const unsigned char* __restrict__ data, const unsigned char* __restrict__ bound,
                              long long n, unsigned char* __restrict__ flags) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step) {
        unsigned char f = 0;
        if (!ws_space(data[i])) {
            if (bound[i] || ws_space(data[i - 1])) f |= 1;      // bound[0] == 1: data[-1] is never read
            if (bound[i + 1] || ws_space(data[i + 1])) f |= 2;  // bound[n] == 1: data[n] is never read
        }
        flags[i] = f;
    }
}

__global__ void ws_lookup(const unsigned char* __restrict__ data, const long long* __restrict__ starts,
                          const long long* __restrict__ ends, long long n_words,
                          const unsigned char* __restrict__ vchars, const long long* __restrict__ voff,
                          const int* __restrict__ table, long long mask, int unk_id, int* __restrict__ ids) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long w = (long long)blockIdx.x * blockDim.x + threadIdx.x; w < n_words; w += step) {
        long long a = starts[w];
        long long len = ends[w] - a;
        const unsigned char* p = data + a;
        long long slot = (long long)(ws_hash(p, len) & (unsigned long long)mask);
        int id = unk_id;
        while (true) {
            int v = table[slot];
            if (v < 0) break;
            long long va = voff[v];
            if (voff[v + 1] - va == len) {
                long long k = 0;
                while (k < len && vchars[va + k] == p[k]) ++k;
                if (k == len) {
                    id = v;
                    break;
                }
            }
            slot = (slot + 1) & mask;
        }
        ids[w] = id;
    }
}

__global__ void ws_segment_sum(const double* __restrict__ x, const long long* __restrict__ seg, long long n_seg,
                               double* __restrict__ out) {
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long s = (long long)blockIdx.x * blockDim.x + threadIdx.x; s < n_seg; s += step) {
        double acc = 0.0;
        for (long long k = seg[s]; k < seg[s + 1]; ++k) acc = __dadd_rn(acc, x[k]);
        out[s] = acc;
    }
}

}  // extern "C"
