"""LSTM language model: the scorer behind the forward / reverse perplexity of text generators
(FPPL and RPPL, Zhao et al. 2018 "Adversarially Regularized Autoencoders" §6; used for the LEBM
paper's PTB table, Pang et al. 2020 Table 3).

Trained by maximum likelihood, ``loss = −Σ log p(x_t | x_<t) / #tokens`` over the non-pad
targets of a batch (``</s>`` included). ``shortrun eval RUN --metrics ppl`` writes the test
perplexity ``exp(total NLL / total tokens)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from shortrun.data.base import DataInfo
from shortrun.data.ptb import lengths, trim
from shortrun.errors import ConfigError
from shortrun.fields import fld
from shortrun.models.base import Model, ModelOptions
from shortrun.models.inputs import check_sample_args
from shortrun.models.text_nets import TokenLSTM, write_token_ids


@dataclass
class LstmLMOptions(ModelOptions):
    emb: int = fld(256, gt=0, doc="word-embedding size")
    hidden: int = fld(512, gt=0, doc="LSTM hidden size")
    layers: int = fld(1, gt=0)
    dropout: float = fld(0.3, ge=0.0, lt=1.0)


def text_vocab_size(info: DataInfo, model: str) -> int:
    if info.kind != "text":
        raise ConfigError(f"model {model!r} needs a text dataset (data.name=ptb); "
                          f"got data of kind {info.kind!r}")
    return int(info.high) + 1


LstmLmOptions = LstmLMOptions  # the earlier name, kept as an alias


class LstmLM(Model):
    Config = LstmLMOptions

    def __init__(self, options: LstmLMOptions | None = None,
                 info: DataInfo | None = None) -> None:
        super().__init__(options, info)
        self._finish_init()

    def setup(self, info: DataInfo) -> None:
        m: LstmLMOptions = self.options
        self.lm = TokenLSTM(text_vocab_size(info, self.name), m.emb, m.hidden, 0, m.layers,
                            m.dropout)

    def log_prob(self, x: torch.Tensor) -> torch.Tensor:
        """``log p(x)`` per sentence, ``(B,)``."""
        return self.lm.log_prob(trim(x))

    def training_step(self, batch, step, optimizers):
        x = trim(batch)
        ntok = float((lengths(x) - 1).sum())
        loss = -self.lm.log_prob(x).sum() / ntok
        self.optimizer_step(optimizers["main"], loss)
        return {"loss": float(loss.detach()), "ppl": float(loss.detach().exp())}

    @torch.no_grad()
    def sample(self, n, steps=None, generator=None):
        check_sample_args(n, steps, generator)
        return self.lm.generate(n, self.require_info("sample").shape[0], generator=generator)

    def draw(self, path, n):
        write_token_ids(self.sample(n), self.reference_data, path.with_suffix(".txt"))

