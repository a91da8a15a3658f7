"""Regenerate docs/performance.md and its plots from the benchmarks' JSON results.

    python benchmarks/models.py mlp cnn --json docs/data/models.json   # any benchmark, any models
    python tools/generate_performance_page.py [--data docs/data] [--check]

Every benchmark in benchmarks/ takes ``--json PATH`` and writes there its table as printed,
the command that made it, the machine (the CPU's model name from /proc/cpuinfo) and the
versions it ran with. This tool reads every ``*.json`` in the data folder and writes one
section per benchmark: what it measures, where and how it was run, the table, and a bar
chart (matplotlib, Agg) of its timing columns as docs/images/performance-<JSON file name>.png. The page
holds only what the JSON files hold: rerun a benchmark and this tool to replace a table (git
keeps the old ones). ``--check`` writes nothing and exits 1 if the page is out of date with
the JSON files (the plots are not compared).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGE = DOCS / "performance.md"
IMAGES = DOCS / "images"

# benchmark -> title, what it measures, columns to plot, the plot's axis, leading label columns
SPECS: dict[str, dict] = {
    "models": {
        "title": "Models: torchedge against PyTorch eager and ExecuTorch",
        "about": "The default program (which ExecuTorch runs too; `torchedge` fuses it at load), the program "
        "compiled with `fuse_kernels=True` (`te fused`), PyTorch eager and the real ExecuTorch runtime with "
        "its portable kernels, timed in turn at one thread; each ratio is the median of the ratios of "
        "back-to-back timings (`unfused`: the default program loaded with `fuse=False`). Planned bytes and `.pte` "
        "sizes are torchedge's against ExecuTorch's for the same model.",
        "plot": ["torchedge ms", "te fused ms", "eager ms", "ExecuTorch ms"],
        "axis": "ms per run (log scale)",
    },
    "delegation": {
        "title": "Delegation: ONNX Runtime and XNNPACK",
        "about": "torchedge's program delegated to ONNX Runtime (`te+ORT`), ExecuTorch's own XNNPACK program, "
        "ONNX Runtime running `torch.onnx`'s export of the same model, and eager; one thread everywhere, "
        "timed in turn.",
        "plot": ["te+ORT ms", "ET+XNNPACK ms", "ORT(torch.onnx) ms", "eager ms"],
        "axis": "ms per run (log scale)",
    },
    "xnnpack": {
        "title": "XNNPACK programs on the NumPy interpreter",
        "about": "A `.pte` lowered to XNNPACK by ExecuTorch, run by torchedge's XNNPACK interpreter "
        "(NumPy), against torchedge's portable program of the same model and ExecuTorch with the real "
        "XNNPACK; `all rows` is the portable program compiled without `narrow_rows` (ExecuTorch's lowering "
        "runs a classifier's last block for every token, torchedge's program for the one its head reads); "
        "`te XNNPACK` is the program torchedge's own `XnnpackPartitioner` lowers (`narrow_rows` included), on the "
        "same interpreter; rel err is the interpreter's largest difference from ExecuTorch's output, relative "
        "to its magnitude.",
        "plot": ["interpreter ms", "portable ms", "ET+XNNPACK ms"],
        "axis": "ms per run (log scale)",
    },
    "xnnpack_lowering": {
        "title": "XNNPACK lowering: torchedge's compiler against ExecuTorch's",
        "about": "Each model lowered to XNNPACK by torchedge's `XnnpackPartitioner` and by ExecuTorch's, each "
        "compiler in a process of its own (compile seconds, export excluded; peak resident MiB during the "
        "compile, and in brackets how far above the resident memory before it); operators left outside "
        "delegates / "
        "delegates; both programs timed on ExecuTorch's runtime (XNNPACK, one thread; ratio = torchedge's "
        "program / ExecuTorch's); errors relative to the reference's largest magnitude, on ExecuTorch's "
        "runtime and on torchedge's (its NumPy interpreter of XNNPACK payloads, both programs). Quantized rows "
        "(`int8`: PT2E static per-channel with `XNNPACKQuantizer`; `dynamic_int8`: its activations quantized per "
        "call, per-channel int8 weights; `8da4w32`: torchao's int8 dynamic activations "
        "with int4 weights in groups of 32) compare against the quantized eager model; `steps` is the largest "
        "difference between the two programs in output quantization steps, where a dequantize makes the output.",
        "plot": ["ET runtime ms (torchedge .pte)", "ET runtime ms (ExecuTorch .pte)"],
        "axis": "ms per run (log scale)",
    },
    "quantized": {
        "title": "Quantized models (PT2E int8)",
        "about": "Models quantized with PT2E and `XNNPACKQuantizer` (per-channel weights): torchedge's int8 "
        "program on the portable kernels and delegated to ONNX Runtime, ExecuTorch's int8 XNNPACK "
        "program, torchedge's float program on ONNX Runtime and eager in float; one thread.",
        "plot": [
            "te int8 portable ms",
            "te int8 + ORT ms",
            "ET int8 + XNNPACK ms",
            "te float + ORT ms",
            "eager float ms",
        ],
        "axis": "ms per run (log scale)",
    },
    "dynamic": {
        "title": "Dynamic shapes",
        "about": "One program exported with a `Dim` range and run at several sizes, against torchedge compiled "
        "statically for each size, ExecuTorch's own dynamic export (portable kernels) and eager; one thread.",
        "plot": ["te dynamic ms", "te static ms", "ET dynamic ms", "eager ms"],
        "axis": "ms per run (log scale)",
        "labels": 2,
    },
    "memory": {
        "title": "Planned memory",
        "about": "Planned activation bytes of torchedge's program and ExecuTorch's for the same model, each "
        "against its lower bound (the most bytes live at once), and ExecuTorch's own algorithm run on "
        "torchedge's graph.",
        "plot": ["torchedge B", "ExecuTorch B", "te lower bound"],
        "axis": "planned bytes (log scale)",
    },
    "generation": {
        "title": "Text generation",
        "about": "Every side runs the same loop: the prompt in one call, then one token per call, one thread "
        "everywhere; `eager's tokens` says whether the side produced eager's greedy tokens.",
        "plot": ["prefill tok/s", "decode tok/s"],
        "axis": "tokens per second (log scale)",
    },
    "llm": {
        "title": "LLM export: float32 and 8da4w on portable, ONNX Runtime and XNNPACK",
        "about": "`torchedge export DIR` of a transformers directory with SmolLM2's shapes (random weights) per "
        "recipe, each compiled in a process of its own (seconds, peak MB) and run in another (load seconds, "
        "RSS after load, one generation: prefill and decode tokens/s), one thread everywhere; `of bound` is "
        "decode over the memory-bandwidth bound (single-thread read bandwidth / bytes of weights per token). "
        "`te + ORT 8da4w` runs the quantized linears as ONNX Runtime's MatMulNBits; `te + XNNPACK` sides are "
        "torchedge's XNNPACK exports run by ExecuTorch's runtime; with `--executorch`, `ET + XNNPACK f32` and "
        "`ET + XNNPACK 8da4w` are ExecuTorch's own lowerings of the same model and of the same torchao model "
        "(its 8da4w decode side by side with torchedge's is the next section). One table per model's shapes; "
        "compare within one table.",
        "plot": ["decode tok/s", "prefill tok/s"],
        "axis": "tokens per second (log scale)",
    },
    "llm_decode_ab": {
        "title": "LLM decode, side by side: 8da4w on ONNX Runtime and XNNPACK against ExecuTorch's lowering",
        "about": "SmolLM2-135M's shapes: torchedge's float32 and 8da4w ONNX Runtime programs on torchedge's runtime, "
        "torchedge's XNNPACK 8da4w program and ExecuTorch's own lowering of the same torchao model on ExecuTorch's "
        "runtime, generating in turn in one process, round after round, one thread everywhere (ExecuTorch's "
        "thread pool included); medians over rounds, `/ bound` as in the table above.",
        "plot": ["decode tok/s"],
        "axis": "decode tokens per second (log scale)",
    },
    "serving": {
        "title": "Serving: `torchedge serve` under load",
        "about": "A `torchedge serve` process with one slot per client (one runtime thread per method), its "
        "clients threads of another process sending streamed greedy completions of mixed prompt lengths: "
        "completion tokens/s across all clients, and percentiles over requests of the time to first token and "
        "per token after it. Then one stream at a time through the server against the loop `torchedge generate` "
        "runs, in-process.",
        "plot": ["tokens/s"],
        "axis": "tokens per second, all clients (log scale)",
    },
    "tracing": {
        "title": "What tracing costs",
        "about": "A method untraced, with every instruction timed (ETDump), and with every intermediate output "
        "logged too; one thread.",
        "plot": ["off ms", "timings ms", "intermediates ms"],
        "axis": "ms per run (log scale)",
    },
    "operators": {
        "title": "Kernels against eager",
        "about": "Single operators on torchedge's portable kernels against eager's, one thread; a ratio above 1 "
        "means torchedge is slower.",
        "plot": [],
        "axis": "",
    },
}

INTRO = """\
<!-- @generated by tools/generate_performance_page.py from docs/data/*.json: do not edit. -->
# Performance

Every table on this page is the output of one run of a script in `benchmarks/`, on the machine
its section names; the page is generated from those runs' JSON files in `docs/data/`. Timings
are medians at one thread, with the sides timed in turn, over and over, so that a machine whose
speed drifts slows them alike. Expect other numbers on another machine, and some noise on a
shared one (ratios within a few percent of each other are ties).

The scripts: `models.py` (the built-in models against eager and ExecuTorch), `delegation.py`,
`xnnpack.py`, `quantized.py`, `dynamic.py`, `memory.py`, `generation.py`, `tracing.py` and
`operators.py` (single operators). Most take model names (all of them by default), and all take
`--json PATH`. To refresh a table, rerun its command with `--json docs/data/<name>.json`, then

```bash
python tools/generate_performance_page.py
```
"""


def _number(cell: str) -> float:
    try:
        return float(cell.replace(",", ""))
    except ValueError:
        return math.nan


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _markdown_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(_cell(c) for c in columns) + " |", "|" + "---|" * len(columns)]
    return lines + ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]


def _load(data: Path) -> list[dict]:
    """Every result file, in SPECS' order (unknown benchmarks last, by name)."""
    results = [{**json.loads(path.read_text()), "file": path.stem} for path in sorted(data.glob("*.json"))]
    order = list(SPECS)
    return sorted(
        results, key=lambda r: (order.index(r["benchmark"]) if r["benchmark"] in order else len(order), r["file"])
    )


def _plotted(result: dict) -> tuple[list[str], list[str], list[str]] | None:
    """(row labels, columns to plot, their values per row) of the first table, or None."""
    spec = SPECS.get(result["benchmark"], {})
    table = result["tables"][0]
    columns = [c for c in spec.get("plot", []) if c in table["columns"]]
    if not columns:
        return None
    labels = [" ".join(row[: spec.get("labels", 1)]) for row in table["rows"]]
    return labels, columns, table["rows"]


def plot(result: dict, path: Path) -> bool:
    """A grouped bar chart of the plotted columns, one group per row; False if there is nothing to plot."""
    plotted = _plotted(result)
    if plotted is None:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels, columns, rows = plotted
    table = result["tables"][0]
    index = {c: table["columns"].index(c) for c in columns}
    width = 0.8 / len(columns)
    fig, ax = plt.subplots(figsize=(max(5.0, 1.2 * len(labels) * len(columns) / 2 + 2), 3.4), dpi=100)
    for n, column in enumerate(columns):
        values = [_number(row[index[column]]) for row in rows]
        xs = [i + (n - (len(columns) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, [0 if math.isnan(v) else v for v in values], width, label=column)
    ax.set_xticks(range(len(labels)), labels)
    ax.set_yscale("log")
    ax.set_ylabel(SPECS[result["benchmark"]]["axis"])
    ax.set_title(SPECS[result["benchmark"]]["title"], fontsize=10)
    ax.legend(fontsize=8, ncol=min(len(columns), 3))
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)
    return True


def _image(result: dict) -> Path:
    """One plot per result file (a benchmark run for several models writes one file per model)."""
    return IMAGES / f"performance-{result['file']}.png"


def _where(result: dict) -> str:
    machine = result["machine"]
    return f"{machine['cpu']} ({machine['cpus']} CPUs, {machine['system']})"


def _versions(result: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in result["versions"].items())


def render(results: list[dict]) -> str:
    lines = [INTRO]
    if not results:
        lines += ["No results yet: run a benchmark with `--json docs/data/<name>.json`.", ""]
    machines = {_where(r) for r in results}
    versions = {_versions(r) for r in results}
    if len(machines) == 1 and len(versions) == 1:
        lines += [f"Every table below was measured on {machines.pop()}, with {versions.pop()}.", ""]
        machines = versions = set()
    for result in results:
        name = result["benchmark"]
        spec = SPECS.get(name, {"title": name, "about": ""})
        lines += [f"## {spec['title']}", ""] + ([spec["about"], ""] if spec["about"] else [])
        where = f" on {_where(result)}" if machines else ""
        used = f", with {_versions(result)}" if versions else ""
        lines += [f"Run {result['date']}{where}{used}:", "", "```bash", result["command"], "```", ""]
        for table in result["tables"]:
            if len(result["tables"]) > 1 or table["name"] != "results":
                lines += [f"**{table['name']}**", ""]
            lines += _markdown_table(table["columns"], table["rows"]) + [""]
        if _plotted(result) is not None:
            lines += [f"![{spec['title']}](images/{_image(result).name})", ""]
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DOCS / "data", help="folder of the benchmarks' JSON results")
    parser.add_argument("--output", type=Path, default=PAGE, help="the page to write")
    parser.add_argument("--check", action="store_true", help="exit 1 if the page is out of date (plots not compared)")
    args = parser.parse_args(argv)
    results = _load(args.data)
    text = render(results)
    if args.check:
        stale = not args.output.exists() or args.output.read_text(encoding="utf-8") != text
        state = "out of date: run python tools/generate_performance_page.py" if stale else "up to date"
        print(f"{args.output.name} is {state}")
        return int(stale)
    for result in results:
        plot(result, _image(result))
    args.output.write_text(text, encoding="utf-8")
    print(f"wrote {args.output} ({len(results)} benchmarks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
