"""Readers: host files and archives, device buffers, frames, ARPA models; the corpus source."""
