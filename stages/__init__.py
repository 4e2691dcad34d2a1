"""cutext.stages."""
