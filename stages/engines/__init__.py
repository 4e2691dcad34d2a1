"""Model engines: LDA chunks and Gibbs samplers, stream clustering, search matrices, the n-gram trie."""
