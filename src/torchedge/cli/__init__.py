"""The `torchedge` command line: export, run, bench, inspect, check, kernels, generate.

`run`, `bench`, `inspect` and `generate` use only the NumPy runtime (`bench --model`
also runs PyTorch eager); `export`, `check` and `kernels --coverage` import torch
when they are called. `main` parses the command line and runs the command; one module
per command group does the work: `export`, `run` (run, bench), `check`, `generate`
and `info` (inspect, kernels).
"""
