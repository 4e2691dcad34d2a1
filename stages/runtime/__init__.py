"""Runtime: compute contexts, progress, outputs and their checksums, parameters, artifact checks."""
