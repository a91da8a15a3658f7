"""`torchedge generate`: text from a decoder-only LM .pte (KV cache) on the NumPy runtime.

One prompt, or with ``--chat`` a conversation read from standard input (one user message per
line, until end of input) whose history stays in the program's cache. ``--stats`` prints
ExecuTorch's runner report (``PyTorchObserver {json}``, then readable lines) after each reply.
"""

from __future__ import annotations

import itertools
import sys

from torchedge.cli.loading import check_program_path, load_program
from torchedge.errors import TorchEdgeError

__all__ = ["cmd_generate"]


def cmd_generate(args) -> int:
    """Generate text with a decoder-only LM on the NumPy runtime, printing text as it comes."""
    from torchedge.generation import Stats, TextGenerator, Tokenizer
    from torchedge.generation.stats import now_ms

    if args.prompt is None and not args.chat:
        raise TorchEdgeError("give --prompt TEXT, or --chat to read a conversation from standard input")
    check_program_path(args.pte)
    tokenizer = Tokenizer.from_file(args.tokenizer)
    stats = Stats(model_load_start_ms=now_ms())
    generator = TextGenerator(load_program(args.pte, args.data_path))
    stats.model_load_end_ms = now_ms()
    stop = args.stop
    if stop is None:  # the program's end-of-sequence ids, else the tokenizer's
        stop = generator.eos_ids or [i for i in (tokenizer.eos_id,) if i is not None]
    options = {
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "seed": args.seed,
        "stop_strings": args.stop_string or (),
        "on_text": lambda text: print(text, end="", flush=True),
        "stats": stats,
    }
    if args.chat:
        return _chat(args, generator, tokenizer, stop, options)
    stats.inference_start_ms = now_ms()
    prompt = tokenizer.encode(args.prompt)
    stats.token_encode_end_ms = now_ms()
    result = generator.generate(prompt, args.max_new_tokens, stop_tokens=stop, tokenizer=tokenizer, **options)
    print()
    _report(args, result)
    return 0


def _chat(args, generator, tokenizer, stop, options) -> int:
    from torchedge.generation import ChatTemplate, Conversation

    template = ChatTemplate.find(args.tokenizer, args.chat_template)
    conversation = Conversation(generator, tokenizer, template, system=args.system, stop_tokens=stop)
    first = [args.prompt] if args.prompt is not None else []
    typed = (line.rstrip("\n") for line in _prompted(iter(sys.stdin.readline, ""), sys.stdin.isatty()))
    for text in itertools.chain(first, typed):
        if not text.strip():
            continue
        options["stats"].reset()
        result = conversation.say(text, args.max_new_tokens, **options)
        print()
        _report(args, result)
    return 0


def _prompted(lines, interactive: bool):
    """The lines of standard input, with a ``> `` prompt before each when a person types them."""
    while True:
        if interactive:
            print("> ", end="", flush=True)
        line = next(lines, None)
        if line is None:
            return
        yield line


def _report(args, result) -> None:
    if args.stats:
        print(result.stats.report())
        return
    print(
        f"prefill: {result.prompt_tokens} tokens, {result.prefill_tokens_per_second:.1f} tokens/s; "
        f"decode: {len(result.tokens)} tokens, {result.decode_tokens_per_second:.1f} tokens/s; "
        f"stopped by {result.stopped_by}"
    )
