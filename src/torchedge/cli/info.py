"""`torchedge inspect` and `torchedge kernels`: describe a .pte, and the registered kernel library."""

from __future__ import annotations

from torchedge.cli.loading import check_data_paths, check_program_path
from torchedge.cli.output import stage
from torchedge.errors import TorchEdgeError

__all__ = ["cmd_inspect", "cmd_kernels"]


def cmd_inspect(args) -> int:
    from torchedge.devtools.describe import describe_memory, describe_program

    check_program_path(args.pte)
    data_paths = check_data_paths(args.data_path)
    if args.memory or args.png:
        print(describe_memory(args.pte, args.png))
    else:
        print(describe_program(args.pte, data_paths))
    return 0


def cmd_kernels(args) -> int:
    """List the registered kernels, the core-ATen coverage of the portable library, or (``--oplist``)
    the operators programs need as ExecuTorch's selected-operators YAML."""
    if getattr(args, "oplist", None):
        from torchedge.cli.oplist import cmd_oplist

        return cmd_oplist(args.oplist, args.output)
    if getattr(args, "output", None):
        raise TorchEdgeError("--output goes with --oplist")
    if not (args.coverage or args.dtypes):
        from torchedge.kernels.registry import registered_operators

        names = registered_operators()
        print("\n".join(names) + f"\n{len(names)} kernels registered")
        return 0
    from torchedge.devtools.kernel_coverage import coverage, format_coverage

    if args.dtypes:
        stage("checking every kernel against PyTorch eager on OpInfo samples (under a minute)")
    print(format_coverage(coverage(check_dtypes=args.dtypes), check_dtypes=args.dtypes))
    return 0
