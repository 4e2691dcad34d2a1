// Forward-trie n-gram language model queries (Li's language model on GPU, after gLM), CUDA bodies of cutext.kernels.trie.
//
// Layout (see stages/trie.py): flat arrays over all levels, global entry indices;
//   keys[e]  int32   last word id of entry e (level 1: e itself)
//   prob[e]  float   log10 probability
//   bo[e]    float   log10 backoff (levels 1..N-1)
//   child[e] int     first child entry (levels 1..N-1); children of e are [child[e], child[e+1])
// The children of one context are sorted by word id and searched as an implicit B-tree of 31-key
// nodes: a warp reads one node (lane j < 31 reads the key at base + (j+1)*S - 1), votes, and descends.
//
// Every kernel mirrors its CPU twin in kernels/trie.py operation for operation (same float32
// accumulation order; compiled with --fmad=false), so GPU and CPU results are bit-identical.

#define FULL_MASK 0xffffffffu
#define MAX_ORDER 16

// Entry index of key w in [lo, hi) of keys, or -1. All 32 lanes of the warp must call it together
// with the same arguments.
__device__ __forceinline__ int warp_find(const int* __restrict__ keys, long long lo, long long hi,
                                         int w, int lane) {
    long long m = hi - lo;
    if (m <= 0) return -1;
    long long S = 1;
    while (S * 32 - 1 < m) S *= 32;
    long long base = lo;
    while (true) {
        long long p = base + (long long)(lane + 1) * S - 1;
        bool valid = (lane < 31) && (p < hi);
        int k = valid ? keys[p] : 0;
        unsigned eq = __ballot_sync(FULL_MASK, valid && k == w);
        if (eq) return (int)(base + (long long)__ffs(eq) * S - 1);
        unsigned lt = __ballot_sync(FULL_MASK, valid && k < w);
        if (S == 1) return -1;
        base += (long long)__popc(lt) * S;
        S /= 32;
    }
}

// One warp per sentence. ids: word ids of all sentences back to back; offsets (n_sent + 1).
// Output token t of sentence s goes to out_offsets[s] + t (eos adds one token per sentence).
extern "C" __global__ void score_sentences(
    const int* __restrict__ keys, const float* __restrict__ prob, const float* __restrict__ bo,
    const int* __restrict__ child, int order,
    const int* __restrict__ ids, const long long* __restrict__ offsets, int n_sent,
    int bos_id, int eos_id, int use_bos, int use_eos,
    const long long* __restrict__ out_offsets, float* __restrict__ tok_prob, int* __restrict__ tok_len,
    double* __restrict__ sent_total)
{
    long long gtid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long s = gtid >> 5;
    int lane = threadIdx.x & 31;
    if (s >= n_sent) return;  // uniform across the warp
    int ctx[MAX_ORDER];
    int e[MAX_ORDER];
    for (int k = 0; k < order - 1; ++k) ctx[k] = -1;
    if (use_bos && order > 1) ctx[0] = bos_id;
    long long a = offsets[s];
    long long b = offsets[s + 1];
    long long o = out_offsets[s];
    long long ntok = (b - a) + (use_eos ? 1 : 0);
    double total = 0.0;
    for (long long t = 0; t < ntok; ++t) {
        int w = (t < b - a) ? ids[a + t] : eos_id;
        e[0] = w;
        for (int k = 1; k < order; ++k) {
            int c = ctx[k - 1];
            e[k] = (c >= 0) ? warp_find(keys, (long long)child[c], (long long)child[c + 1], w, lane) : -1;
        }
        int j = 1;
        for (int k = 2; k <= order; ++k) {
            if (e[k - 1] >= 0) j = k;
        }
        float p = prob[e[j - 1]];
        for (int k = j; k < order; ++k) {
            int c = ctx[k - 1];
            if (c >= 0) p = __fadd_rn(p, bo[c]);
        }
        for (int k = 1; k < order; ++k) ctx[k - 1] = e[k - 1];
        if (lane == 0) {
            tok_prob[o + t] = p;
            tok_len[o + t] = j;
        }
        total = __dadd_rn(total, (double)p);
    }
    if (lane == 0) sent_total[s] = total;
}

// One warp per row: out[r * max_len + k - 1] = entry of the n-gram made of the last k words of row r
// (level k), -1 when it is not in the model or the row is shorter than k.
extern "C" __global__ void suffix_entries(
    const int* __restrict__ keys, const int* __restrict__ child,
    const int* __restrict__ ids, const long long* __restrict__ offsets, int n_rows, int max_len,
    int* __restrict__ out)
{
    long long gtid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long r = gtid >> 5;
    int lane = threadIdx.x & 31;
    if (r >= n_rows) return;
    long long a = offsets[r];
    long long L = offsets[r + 1] - a;
    for (int k = 1; k <= max_len; ++k) {
        int ent = -1;
        if (L >= k) {
            ent = ids[a + L - k];
            for (long long t = L - k + 1; t < L; ++t) {
                ent = warp_find(keys, (long long)child[ent], (long long)child[ent + 1], ids[a + t], lane);
                if (ent < 0) break;
            }
        }
        if (lane == 0) out[r * max_len + (k - 1)] = ent;
    }
}

// One block per context row: out[r, :] = log10 p(w | context) for every word w, with back-off,
// using orders 1..n (n - 1 context entries in ctx[r, :], from suffix_entries).
extern "C" __global__ void fill_distribution(
    const int* __restrict__ keys, const float* __restrict__ prob, const float* __restrict__ bo,
    const int* __restrict__ child, int V, int n,
    const int* __restrict__ ctx, int n_rows, float* __restrict__ out)
{
    __shared__ int h[MAX_ORDER];
    __shared__ float hb[MAX_ORDER];
    int r = blockIdx.x;
    if (r >= n_rows) return;
    if (threadIdx.x < n - 1) {
        int c = ctx[(long long)r * (n - 1) + threadIdx.x];
        h[threadIdx.x] = c;
        hb[threadIdx.x] = (c >= 0) ? bo[c] : 0.0f;
    }
    __syncthreads();
    float* row = out + (long long)r * V;
    for (int w = threadIdx.x; w < V; w += blockDim.x) {
        float p = prob[w];
        for (int k = 1; k < n; ++k) {
            if (h[k - 1] >= 0) p = __fadd_rn(p, hb[k - 1]);
        }
        row[w] = p;
    }
    for (int j = 2; j <= n; ++j) {
        __syncthreads();
        int c = h[j - 2];
        if (c < 0) continue;
        int lo = child[c];
        int hi = child[c + 1];
        for (int e = lo + threadIdx.x; e < hi; e += blockDim.x) {
            float p = prob[e];
            for (int k = j; k < n; ++k) {
                if (h[k - 1] >= 0) p = __fadd_rn(p, hb[k - 1]);
            }
            row[keys[e]] = p;
        }
    }
}
