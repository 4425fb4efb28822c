"""The pandas-free research core: what the notebook frames, the corpus and the CLI compute
over a loaded log."""
