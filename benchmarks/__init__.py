"""Benchmarks (``make bench``): mirrorflow's copy job side by side with MirrorMaker 2 and the raw client loop."""
