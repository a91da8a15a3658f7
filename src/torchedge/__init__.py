"""torchedge: the ExecuTorch stack in Python.

`torchedge.exir` compiles an `nn.Module` to a `.pte` program (needs torch);
`torchedge.runtime` loads and executes it with NumPy only.
"""

__version__ = "0.1.0"
