"""Backends: each folder holds a partitioner + preprocess (AOT) and a runtime half (no torch)."""
