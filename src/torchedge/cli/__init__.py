"""The `torchedge` command line: export, run, bench, profile, debug, inspect, compare, check, kernels,
generate.

`run`, `bench`, `profile`, `inspect`, `compare` and `generate` use only the NumPy runtime (`bench
--model` also runs PyTorch eager); `export`, `check`, `debug` and `kernels --coverage` import torch
when they are called. `parser` declares the commands and options, `main` runs one and reports its
errors; one module per command group does the work: `export` (with `models`, which model a name
means, and `recipes`, dtype, quantization and backend), `run` (run, bench), `profile` (profile,
debug), `compare`, `check`, `generate` and `info` (inspect, kernels). `loading`, `inputs`, `options`
and `output` serve them all.
"""
