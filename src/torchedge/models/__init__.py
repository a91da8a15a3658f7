"""Built-in example models (AOT side: needs torch; the transformers ones need `transformers`)."""

from torchedge.models.zoo import MODEL_NAMES, load_model

__all__ = ["MODEL_NAMES", "load_model"]
