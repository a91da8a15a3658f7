"""Text generation on the NumPy runtime: sampling, tokenizers, a KV-cache generation loop, chats.

Like `torchedge.runtime`, this package never imports torch; `tokenizers` is imported only
when a tokenizer is used, `jinja2` only when a chat template is compiled.
"""

from torchedge.generation.chat import ChatTemplate
from torchedge.generation.conversation import Conversation
from torchedge.generation.runner import GenerationResult, TextGenerator
from torchedge.generation.sampling import Sampler, greedy
from torchedge.generation.stats import Stats
from torchedge.generation.stops import StopText
from torchedge.generation.tokenizer import TextStream, Tokenizer, train_bpe_tokenizer

__all__ = [
    "ChatTemplate",
    "Conversation",
    "GenerationResult",
    "Sampler",
    "Stats",
    "StopText",
    "TextGenerator",
    "TextStream",
    "Tokenizer",
    "greedy",
    "train_bpe_tokenizer",
]
