"""List the operator names ExecuTorch's runtime registers kernels for, from ExecuTorch itself.

The names come from the installed ExecuTorch's own kernel registry (the pybindings'
``_get_operator_names()``), after importing the libraries that add runtime kernels to it:
``portable_lib`` brings the portable and optimized kernels and the prim ops,
``executorch.kernels.quantized`` the ``quantized_decomposed`` kernels and
``executorch.extension.llm.custom_ops`` the LLM custom ops (``llama::*``, ``preprocess::*``).
Every name a program built by ExecuTorch can call is in this list, so torchedge must have a
kernel for each (tests/kernels/test_executorch_kernel_names.py checks it).

    .venv/bin/python tools/executorch_kernel_names.py           # rewrite the golden file
    .venv/bin/python tools/executorch_kernel_names.py --check   # exit 1 if it is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden" / "executorch_kernel_names.json"
REGENERATE = ".venv/bin/python tools/executorch_kernel_names.py"

# Importing these registers more kernels with ExecuTorch's runtime registry (their shared
# libraries hold the runtime kernels as well as the AOT definitions).
KERNEL_LIBRARIES = ("executorch.kernels.quantized", "executorch.extension.llm.custom_ops.custom_ops")


def executorch_kernel_names() -> tuple[str, list[str]]:
    """ExecuTorch's version and the sorted names of every kernel its runtime registers."""
    import importlib

    from executorch.extension.pybindings import portable_lib
    from executorch.version import __version__

    for module in KERNEL_LIBRARIES:
        importlib.import_module(module)
    return __version__, sorted(set(portable_lib._get_operator_names()))


def golden_document(version: str, names: list[str]) -> dict:
    return {
        "header": {
            "executorch_version": version,
            "source": "executorch.extension.pybindings.portable_lib._get_operator_names() after importing "
            + ", ".join(KERNEL_LIBRARIES),
            "regenerate": REGENERATE,
            "count": len(names),
        },
        "names": names,
    }


def read_golden(path: Path = GOLDEN) -> list[str]:
    """The names in the checked-in golden file (needs neither torch nor ExecuTorch)."""
    return json.loads(path.read_text())["names"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the golden file instead of writing it")
    parser.add_argument("--output", type=Path, default=GOLDEN, help="the golden file (default: %(default)s)")
    args = parser.parse_args(argv)
    version, names = executorch_kernel_names()
    document = golden_document(version, names)
    text = json.dumps(document, indent=1) + "\n"
    if not args.check:
        args.output.write_text(text)
        print(f"wrote {len(names)} names (ExecuTorch {version}) to {args.output}")
        return 0
    if not args.output.exists():
        print(f"{args.output} is missing; run {REGENERATE}", file=sys.stderr)
        return 1
    golden = json.loads(args.output.read_text())
    old, new = set(golden["names"]), set(names)
    if golden == document:
        print(f"{args.output} is up to date ({len(names)} names, ExecuTorch {version})")
        return 0
    for name in sorted(new - old):
        print(f"+ {name}", file=sys.stderr)
    for name in sorted(old - new):
        print(f"- {name}", file=sys.stderr)
    header = golden.get("header", {})
    if header.get("executorch_version") != version:
        print(f"ExecuTorch version {header.get('executorch_version')} -> {version}", file=sys.stderr)
    print(f"{args.output} is out of date; run {REGENERATE}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
