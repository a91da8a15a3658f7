"""Built-in example models and `export_pretrained` for transformers model directories (AOT side:
needs torch; the transformers ones need `transformers`)."""

from torchedge.models.pretrained import export_pretrained
from torchedge.models.zoo import MODEL_NAMES, load_model

__all__ = ["MODEL_NAMES", "export_pretrained", "load_model"]
