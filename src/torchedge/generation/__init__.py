"""Text generation on the NumPy runtime: sampling, tokenizers, and a KV-cache generation loop.

Like `torchedge.runtime`, this package never imports torch; `tokenizers` is imported only
when a tokenizer is used.
"""

from torchedge.generation.runner import GenerationResult, TextGenerator
from torchedge.generation.sampling import Sampler, greedy
from torchedge.generation.tokenizer import TextStream, Tokenizer, train_bpe_tokenizer

__all__ = ["GenerationResult", "Sampler", "TextGenerator", "TextStream", "Tokenizer", "greedy", "train_bpe_tokenizer"]
