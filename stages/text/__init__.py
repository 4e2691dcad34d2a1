"""Text operations: tokenize (host and device), encode, sort, count, term vectors, BM25 weights, the corpus front end
and the public stages."""
