"""Built-in models by name: each factory returns ``(module in eval mode, example inputs)``.

The `transformers` models are built from config objects with random weights,
so nothing is downloaded.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
from collections.abc import Callable

import torch
from torch import nn

from torchedge.errors import ExportError

__all__ = ["MODEL_NAMES", "load_model", "MLP", "SmallCNN"]


class MLP(nn.Module):
    def __init__(self, sizes=(32, 64, 64, 10)):
        super().__init__()
        layers = []
        for i, (n_in, n_out) in enumerate(zip(sizes, sizes[1:])):
            layers.append(nn.Linear(n_in, n_out))
            if i < len(sizes) - 2:
                layers.append(nn.ReLU())
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class SmallCNN(nn.Module):
    """conv2d, batch norm, relu, max pool, adaptive average pool, linear."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.classifier = nn.Linear(32, num_classes)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class _Logits(nn.Module):
    """Return only ``.logits`` of a `transformers` model output."""

    def __init__(self, model: nn.Module, **call_kwargs):
        super().__init__()
        self.model = model
        self.call_kwargs = call_kwargs

    def forward(self, x):
        return self.model(x, **self.call_kwargs).logits


class _LastHiddenState(nn.Module):
    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return self.model(x).last_hidden_state


def _randomize_batch_norm_stats(model: nn.Module, seed: int = 0) -> None:
    """Fresh models have mean 0 / var 1 statistics; give them realistic ones so tests can fail."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)


def _mlp():
    return MLP().eval(), (torch.randn(4, 32),)


def _cnn():
    model = SmallCNN().eval()
    _randomize_batch_norm_stats(model)
    return model, (torch.randn(2, 3, 32, 32),)


def _transformers():
    try:
        return importlib.import_module("transformers")
    except ImportError:
        raise ExportError("this model needs the 'transformers' package: pip install transformers") from None


def _mobilenet_v2():
    tf = _transformers()
    model = tf.MobileNetV2ForImageClassification(tf.MobileNetV2Config()).eval()
    _randomize_batch_norm_stats(model)
    return _Logits(model).eval(), (torch.randn(1, 3, 224, 224),)


def _llama():
    tf = _transformers()
    config = tf.LlamaConfig(
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=4,
        intermediate_size=688,
        vocab_size=4096,
        max_position_embeddings=512,
        use_cache=False,
    )
    model = tf.LlamaForCausalLM(config).eval()
    return _Logits(model, use_cache=False).eval(), (torch.randint(0, 4096, (1, 128)),)


def _resnet18():
    tf = _transformers()
    config = tf.ResNetConfig(
        layer_type="basic", depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512], embedding_size=64, num_labels=1000
    )
    model = tf.ResNetForImageClassification(config).eval()
    _randomize_batch_norm_stats(model)
    return _Logits(model).eval(), (torch.randn(1, 3, 224, 224),)


def _vit():
    """ViT-S/16-shaped: 224x224 image, 16x16 patches, hidden 384, 6 layers, 6 heads."""
    tf = _transformers()
    config = tf.ViTConfig(
        hidden_size=384,
        num_hidden_layers=6,
        num_attention_heads=6,
        intermediate_size=1536,
        image_size=224,
        patch_size=16,
        num_labels=1000,
    )
    return _Logits(tf.ViTForImageClassification(config).eval()).eval(), (torch.randn(1, 3, 224, 224),)


def _bert():
    """BERT-shaped encoder: hidden 256, 4 layers, 4 heads, 128 tokens; returns the last hidden state."""
    tf = _transformers()
    config = tf.BertConfig(
        hidden_size=256,
        num_hidden_layers=4,
        num_attention_heads=4,
        intermediate_size=1024,
        vocab_size=8192,
        max_position_embeddings=512,
    )
    return _LastHiddenState(tf.BertModel(config).eval()).eval(), (torch.randint(0, 8192, (1, 128)),)


_FACTORIES: dict[str, Callable] = {
    "mlp": _mlp,
    "cnn": _cnn,
    "mobilenet_v2": _mobilenet_v2,
    "llama": _llama,
    "resnet18": _resnet18,
    "vit": _vit,
    "bert": _bert,
}
MODEL_NAMES = tuple(_FACTORIES)


def load_model(name: str, seed: int = 0):
    """``(model, example_inputs)`` for a built-in name or ``path/to/file.py:factory``."""
    torch.manual_seed(seed)
    if name in _FACTORIES:
        return _FACTORIES[name]()
    if ":" in name:
        path, factory = name.rsplit(":", 1)
        if os.path.isfile(path):
            spec = importlib.util.spec_from_file_location("_torchedge_user_model", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return getattr(module, factory)()
    raise ExportError(
        f"unknown model '{name}': use one of {', '.join(MODEL_NAMES)} "
        "or 'path/to/file.py:factory' returning (model, example_inputs)"
    )
