"""What the transformers export tests share: a tiny random Llama and a small trained tokenizer."""

from __future__ import annotations


def tiny_llama(vocab_size: int, tied: bool):
    """A random 2-layer ``LlamaForCausalLM`` (64 features, 4 heads, 2 KV heads, 64 positions,
    seed 0) in eval mode; ``tied``: the output projection is the embedding."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        initializer_range=0.5,  # logits far apart: greedy choices are not decided by rounding
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(0)
    return LlamaForCausalLM(config).eval()


def byte_level_bpe(texts):
    """A ``tokenizers`` byte-level BPE of up to 200 tokens (``<pad>``, ``<s>``, ``</s>`` first)
    trained on ``texts``: its alphabet is their ASCII only, so every token decodes to whole
    characters (ExecuTorch's runner can hand each one to Python as a str)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=200, special_tokens=["<pad>", "<s>", "</s>"], show_progress=False)
    backend.train_from_iterator(texts, trainer)
    return backend
