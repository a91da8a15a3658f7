"""`torchedge export`: compile a built-in or user model to a .pte (also the first step of `check`)."""

from __future__ import annotations

import os

from torchedge.cli.output import stage
from torchedge.errors import TorchEdgeError

__all__ = ["compile_model", "cmd_export"]


def compile_model(model_name: str, dynamic: list | None = None):
    """The model, its example inputs and its `ExecutorchProgramManager`, with progress on stderr."""
    import torch

    from torchedge.devtools.dynamic_inputs import dynamic_shapes, resize_along
    from torchedge.exir import to_edge
    from torchedge.models import load_model

    stage(f"building model '{model_name}'")
    model, inputs = load_model(model_name)
    inputs = list(inputs)
    for d in dynamic or []:  # export traces one size in range; torch.export specialises sizes 0 and 1
        example = inputs[d.input].shape[d.dim] if d.input < len(inputs) and d.dim < inputs[d.input].dim() else None
        if example is not None and not max(d.min, 2) <= example <= d.max:
            inputs[d.input] = resize_along(inputs[d.input], d.dim, min(max(d.min, 2), d.max))
    inputs = tuple(inputs)
    stage("torch.export.export")
    exported = torch.export.export(model, inputs, dynamic_shapes=dynamic_shapes(dynamic or [], len(inputs)))
    stage("to_edge (core ATen decomposition)")
    edge = to_edge(exported)
    stage("to_executorch (out variants, memory planning, emit)")
    return model, inputs, edge.to_executorch()


def cmd_export(args) -> int:
    if args.model.endswith("-kv"):
        return _export_kv_cache_model(args)
    _, _, program = compile_model(args.model, args.dynamic)
    out = args.output or f"{args.model.split(':')[-1]}.pte"
    program.save(out)
    print(f"wrote {out} ({len(program.buffer):,} bytes)")
    return 0


def _export_kv_cache_model(args) -> int:
    """A built-in decoder-only LM with a static KV cache, and a demo tokenizer.json beside it."""
    from torchedge.models.causal_lm import compile_causal_lm, demo_tokenizer, load_kv_cache_model

    if args.dynamic:
        raise TorchEdgeError(f"--dynamic does not apply to '{args.model}': its sequence length is already dynamic")
    stage(f"building '{args.model}' and exporting it with a static KV cache")
    exported = load_kv_cache_model(args.model)
    stage("to_edge, to_executorch (forward prefills, decode takes one token; they share the cache)")
    program = compile_causal_lm(exported)
    out = args.output or f"{args.model}.pte"
    program.save(out)
    tokenizer = f"{os.path.splitext(out)[0]}.tokenizer.json"
    vocab_size = exported.constant_methods["get_vocab_size"]
    assert isinstance(vocab_size, int)  # _constant_methods stores it as an int
    demo_tokenizer(vocab_size=vocab_size).save(tokenizer)
    print(f"wrote {out} ({len(program.buffer):,} bytes) and {tokenizer}")
    return 0
