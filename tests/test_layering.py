"""The dependency walls, checked on the source.

Every ``import`` of every module under ``src/torchedge`` is read from its AST, including
imports inside functions: a lazy import is still a dependency. Two rules:

* the runtime half never reaches torch, ExecuTorch, the compiler, devtools or the model zoo;
* no two parts of the package (``torchedge.<pkg>.<subpkg-or-module>``) import each other.
"""

from __future__ import annotations

import ast
from collections import deque
from functools import cache
from pathlib import Path

SOURCE_ROOT = Path(__file__).resolve().parents[1] / "src"

RUNTIME_HALF = (
    "torchedge.runtime",
    "torchedge.kernels",
    "torchedge.schema",
    "torchedge.serialize",
    "torchedge.errors",
    "torchedge.generation",
    "torchedge.backends.onnxruntime.runtime",
    "torchedge.backends.xnnpack",
)
# The AOT halves that live inside a runtime package: the XNNPACK backend's lowering writes payloads
# with the runtime half's schema and codec, never the other way round.
AOT_WITHIN_RUNTIME = ("torchedge.backends.xnnpack.aot",)
FORBIDDEN_IN_RUNTIME = ("torch", "executorch", "torchedge.exir", "torchedge.devtools", "torchedge.models")
ALLOWED_WALL_CROSSINGS = {
    # ATen mode exists to run programs with PyTorch's kernels; it imports torch lazily, only
    # when a program is loaded with Runtime.get(kernels="aten").
    ("torchedge.kernels.aten_mode", "torch")
}
ALLOWED_PART_EDGES = {
    # Plugin loading: on first lookup the kernel registry imports the kernel libraries so that
    # their kernels register themselves; the libraries import the registry to register.
    ("torchedge.kernels.registry", "torchedge.kernels.portable"),
    ("torchedge.kernels.registry", "torchedge.kernels.quantized"),
    ("torchedge.kernels.registry", "torchedge.kernels.optimized"),
}


@cache
def module_files() -> dict[str, Path]:
    """Dotted module name -> source file, for every module of the torchedge package."""
    modules = {}
    for path in sorted((SOURCE_ROOT / "torchedge").rglob("*.py")):
        parts = path.relative_to(SOURCE_ROOT).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def is_package(module: str) -> bool:
    return module_files()[module].name == "__init__.py"


def import_statements(tree: ast.AST, *, in_functions: bool):
    """The import statements of ``tree``; with ``in_functions=False`` only those its top level runs."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        if in_functions or not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from import_statements(node, in_functions=in_functions)


@cache
def imported_names(module: str, *, in_functions: bool = True) -> frozenset[str]:
    """Every module ``module`` imports: torchedge modules by full name, others by top-level name."""
    tree = ast.parse(module_files()[module].read_text(), filename=str(module_files()[module]))
    package = module if is_package(module) else module.rpartition(".")[0]
    names = set()
    for node in import_statements(tree, in_functions=in_functions):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                names.add(submodule if submodule in module_files() else base)
    return frozenset(name if name.startswith("torchedge") else name.split(".")[0] for name in names)


def loaded_by(module: str, *, top_level_only: bool) -> set[tuple[str, bool]]:
    """What loading ``module`` may import, each as (name, top_level_only).

    Importing ``a.b.c`` also runs the ``__init__`` of ``a.b`` and ``a``, but only their top
    level: a package may keep an import inside a function (an AOT name loaded on first use)
    that its submodules never trigger.
    """
    loaded = set()
    for name in imported_names(module, in_functions=not top_level_only):
        loaded.add((name, False))
        while name.count("."):
            name = name.rpartition(".")[0]
            loaded.add((name, True))
    return {(name, top) for name, top in loaded if name != module and not (top and (name, False) in loaded)}


def is_within(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".")


def in_runtime_half(module: str) -> bool:
    if any(is_within(module, prefix) for prefix in AOT_WITHIN_RUNTIME):
        return False
    return any(is_within(module, prefix) for prefix in RUNTIME_HALF)


def forbidden_chains() -> list[list[str]]:
    """Import chains from a runtime-half module to a forbidden module, shortest first."""
    starts = [(m, False) for m in module_files() if in_runtime_half(m)]
    parent: dict[tuple[str, bool], tuple[str, bool] | None] = {start: None for start in starts}
    queue = deque(starts)
    chains = []
    while queue:
        module, top_level_only = queue.popleft()
        for loaded in sorted(loaded_by(module, top_level_only=top_level_only)):
            name = loaded[0]
            if (module, name) in ALLOWED_WALL_CROSSINGS or loaded in parent:
                continue
            parent[loaded] = (module, top_level_only)
            if any(is_within(name, prefix) for prefix in FORBIDDEN_IN_RUNTIME):
                chain = [loaded]
                while parent[chain[-1]] is not None:
                    chain.append(parent[chain[-1]])
                chains.append([name for name, _ in reversed(chain)])
            elif name in module_files():
                queue.append(loaded)
    return chains


def test_runtime_half_imports_no_compiler_and_no_torch():
    chains = forbidden_chains()
    assert not chains, "the runtime half imports what it must not:\n" + "\n".join(
        "  " + " -> ".join(chain) for chain in chains
    )


def part_of(module: str) -> str:
    """The unit of the cycle check: ``torchedge.<pkg>.<subpkg-or-module>`` (or shorter)."""
    return ".".join(module.split(".")[:3])


def is_reexporting_package(module: str) -> bool:
    """A package above the unit (``torchedge``, ``torchedge.exir``): its ``__init__`` only re-exports."""
    return is_package(module) and module.count(".") < 2


@cache
def part_dependencies(module: str) -> frozenset[str]:
    """The parts ``module`` depends on; importing a re-exporting package means what it re-exports."""
    parts = set()
    for name in imported_names(module):
        if name not in module_files():
            continue
        if is_reexporting_package(name):
            parts |= part_dependencies(name)
        else:
            parts.add(part_of(name))
    return frozenset(parts)


@cache
def part_edges() -> dict[tuple[str, str], str]:
    """(part, part it imports) -> the first module whose imports make that edge."""
    edges: dict[tuple[str, str], str] = {}
    for module in module_files():
        if not is_reexporting_package(module):
            for target in sorted(part_dependencies(module) - {part_of(module)}):
                edges.setdefault((part_of(module), target), module)
    return edges


def part_graph() -> dict[str, dict[str, str]]:
    """part -> {part it imports: the module that makes the edge}, without the allowed edges."""
    graph: dict[str, dict[str, str]] = {}
    for (source, target), module in part_edges().items():
        if (source, target) not in ALLOWED_PART_EDGES:
            graph.setdefault(source, {})[target] = module
    return graph


def find_cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle of the graph as a closed list of nodes, or None."""
    state: dict[str, str] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in graph.get(node, {}):
            if state.get(target) == "open":
                return stack[stack.index(target) :] + [target]
            if target not in state and (cycle := visit(target)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_parts_do_not_import_each_other():
    graph = part_graph()
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle between parts:\n" + "\n".join(
        f"  {a} -> {b}   ({graph[a][b]} imports it)" for a, b in zip(cycle, cycle[1:])
    )


def test_allowances_are_still_needed():
    """An allowance outlives its reason silently unless the edge it allows is still there."""
    crossings = {(module, name) for module in module_files() for name in imported_names(module)}
    assert ALLOWED_WALL_CROSSINGS <= crossings, ALLOWED_WALL_CROSSINGS - crossings
    assert ALLOWED_PART_EDGES <= part_edges().keys(), ALLOWED_PART_EDGES - part_edges().keys()
