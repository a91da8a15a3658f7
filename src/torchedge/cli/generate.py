"""`torchedge generate`: text from a decoder-only LM .pte (KV cache) on the NumPy runtime."""

from __future__ import annotations

from torchedge.cli.loading import check_program_path, load_program

__all__ = ["cmd_generate"]


def cmd_generate(args) -> int:
    """Generate text with a decoder-only LM on the NumPy runtime, printing tokens as they come."""
    from torchedge.generation import TextGenerator, Tokenizer

    check_program_path(args.pte)
    tokenizer = Tokenizer.from_file(args.tokenizer)
    generator = TextGenerator(load_program(args.pte))
    stop = args.stop
    if stop is None:  # the program's end-of-sequence ids, else the tokenizer's
        stop = generator.eos_ids or [i for i in (tokenizer.eos_id,) if i is not None]
    stream = tokenizer.stream()
    result = generator.generate(
        tokenizer.encode(args.prompt),
        args.max_new_tokens,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        seed=args.seed,
        stop_tokens=stop,
        callback=lambda token: print(stream.push(token), end="", flush=True),
    )
    print()
    print(
        f"prefill: {result.prompt_tokens} tokens, {result.prefill_tokens_per_second:.1f} tokens/s; "
        f"decode: {len(result.tokens)} tokens, {result.decode_tokens_per_second:.1f} tokens/s; "
        f"stopped by {result.stopped_by}"
    )
    return 0
