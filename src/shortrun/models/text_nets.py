"""LSTM networks for text: the decoder ``p_β(x|z)`` of the text LEBM and a plain LSTM language
model (the scorer of forward/reverse perplexity).

Decoder (Pang et al. 2020 §5.2, following the text-VAE decoders of Bowman et al. 2016 and
Kim et al. 2018): ``p_β(x|z) = Π_t p(x_t | x_<t, z)`` with ``z`` both initialising the LSTM state
(``h_0 = tanh(W_h z)``, ``c_0 = W_c z``) and concatenated to every input embedding. With
``nz = 0`` the same module is an unconditional LSTM language model.

Sequences are rows ``<s> w_1 … w_n </s> <pad>…`` (:mod:`shortrun.data.ptb`): the inputs are
``x[:, :-1]``, the targets ``x[:, 1:]``, and ``<pad>`` targets are masked out, so ``</s>`` is
scored (as in the text-VAE papers' NLL) and ``<s>`` is not.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from shortrun.data.ptb import BOS_ID, EOS_ID, PAD_ID, decode


def token_log_probs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """``log p(target_t | …)`` per position, ``0`` at ``<pad>`` targets: ``(B, T)``."""
    return -F.cross_entropy(logits.transpose(1, 2), targets, reduction="none",
                            ignore_index=PAD_ID)


class TokenLSTM(nn.Module):
    """``x_<t (, z) → logits of x_t``: embedding → LSTM → linear over the vocabulary."""

    def __init__(self, vocab: int, emb: int, hidden: int, nz: int = 0, layers: int = 1,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.vocab, self.nz, self.hidden, self.layers = vocab, nz, hidden, layers
        self.embed = nn.Embedding(vocab, emb, padding_idx=PAD_ID)
        self.drop = nn.Dropout(dropout)
        self.lstm = nn.LSTM(emb + nz, hidden, layers, batch_first=True,
                            dropout=dropout if layers > 1 else 0.0)
        self.out = nn.Linear(hidden, vocab)
        self.init_state = nn.Linear(nz, 2 * hidden * layers) if nz > 0 else None

    def _state(self, z: torch.Tensor | None, batch: int):
        if self.init_state is None or z is None:
            return None
        h, c = self.init_state(z).view(batch, 2, self.layers, self.hidden).unbind(1)
        return torch.tanh(h).transpose(0, 1).contiguous(), c.transpose(0, 1).contiguous()

    def _inputs(self, tokens: torch.Tensor, z: torch.Tensor | None) -> torch.Tensor:
        e = self.drop(self.embed(tokens))
        if self.nz > 0:
            e = torch.cat([e, z[:, None, :].expand(-1, tokens.shape[1], -1)], dim=2)
        return e

    def forward(self, tokens: torch.Tensor, z: torch.Tensor | None = None,
                state=None) -> tuple[torch.Tensor, tuple]:
        """Logits ``(B, T, V)`` for next tokens after ``tokens (B, T)``, and the LSTM state."""
        if state is None:
            state = self._state(z, tokens.shape[0])
        h, state = self.lstm(self._inputs(tokens, z), state)
        return self.out(self.drop(h)), state

    def log_prob(self, x: torch.Tensor, z: torch.Tensor | None = None) -> torch.Tensor:
        """``log p(x | z) = Σ_t log p(x_t | x_<t, z)`` over non-pad targets: ``(B,)``."""
        logits, _ = self(x[:, :-1], z)
        return token_log_probs(logits, x[:, 1:]).sum(1)

    @torch.no_grad()
    def generate(self, n: int, max_len: int, z: torch.Tensor | None = None,
                 generator: torch.Generator | None = None,
                 temperature: float = 1.0) -> torch.Tensor:
        """Ancestral samples ``(n, max_len)``: ``<s> … </s>`` then ``<pad>``; a row that never
        emits ``</s>`` is cut at ``max_len`` tokens (its last token is forced to ``</s>``)."""
        device = self.out.weight.device
        out = torch.full((n, max_len), PAD_ID, dtype=torch.int64, device=device)
        out[:, 0] = BOS_ID
        done = torch.zeros(n, dtype=torch.bool, device=device)
        tok, state = out[:, :1], None
        for t in range(1, max_len):
            logits, state = self(tok, z, state)
            logits = logits[:, -1] / temperature
            logits[:, PAD_ID] = float("-inf")
            logits[:, BOS_ID] = float("-inf")
            if t == max_len - 1:
                nxt = torch.full((n,), EOS_ID, dtype=torch.int64, device=device)
            else:
                nxt = torch.multinomial(logits.softmax(-1), 1, generator=generator).squeeze(1)
            out[:, t] = torch.where(done, torch.full_like(nxt, PAD_ID), nxt)
            done |= nxt == EOS_ID
            if bool(done.all()):
                break
            tok = nxt[:, None]
        return out


def write_token_ids(ids: torch.Tensor, data, path) -> None:
    """The training pictures of a text model: one sentence a line, decoded with the vocabulary
    of the run's own data (``data.extras["vocab"]``); token ids when there is none."""
    from pathlib import Path

    vocab = None if data is None else data.extras.get("vocab")
    rows = decode(ids.cpu(), vocab) if vocab is not None else \
        [" ".join(str(int(i)) for i in row) for row in ids.cpu().tolist()]
    Path(path).write_text("\n".join(rows) + "\n", encoding="utf-8")
