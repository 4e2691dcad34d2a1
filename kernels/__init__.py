"""cutext.kernels."""
