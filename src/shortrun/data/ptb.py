"""Penn Treebank, Mikolov's version (``ptb/ptb.{train,valid,test}.txt`` under ``--data-dir`` /
``$SHORTRUN_DATA``), tokenised as in the text-VAE literature (Bowman et al. 2016; Kim et al.
2018; the LEBM paper's text experiments, Pang et al. 2020 §5.2).

- One sentence per line, split on whitespace; the corpus' own ``<unk>`` and ``N`` are kept as
  ordinary words (the files are already reduced to a 10k-word vocabulary).
- The vocabulary is read from the train file only: ``<pad>`` = 0, ``<s>`` = 1, ``</s>`` = 2,
  then the words by decreasing count (ties alphabetically). A word of valid/test that the train
  file lacks becomes ``<unk>`` (none does in Mikolov's files).
- A sentence becomes ``<s> w_1 … w_n </s>`` padded with ``<pad>`` to a common length ``L``:
  ``train``/``test`` are int64 ``(N, L)`` tensors, ``extras["valid"]`` the valid split,
  ``extras["vocab"]`` the id → word list. ``DataInfo(shape=(L,), kind="text", low=0,
  high=V-1)``, so a model reads the vocabulary size ``V`` as ``int(info.high) + 1``.

Batches come from the Trainer's shuffled batcher; text models trim each batch to its longest
sentence (:func:`trim`), which is where the saving of length-bucketing comes from on CPU.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import torch

from shortrun.data.base import DataInfo, DataOptions, LoadedData, resolve_data_dir
from shortrun.errors import DataError
from shortrun.fields import fld

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"
PAD_ID, BOS_ID, EOS_ID = 0, 1, 2
SPLITS = ("train", "valid", "test")
WHERE = ("Mikolov's simple-examples PTB (ptb.train.txt, ptb.valid.txt, ptb.test.txt; "
         "shared/data/ptb)")


@dataclass
class PtbOptions(DataOptions):
    name: str = fld("ptb", choices=("ptb",))
    max_words: int | None = fld(None, gt=0,
                                doc="drop training sentences longer than this many words")
    n_train: int | None = fld(None, gt=0, doc="keep only the first n training sentences")


def read_sentences(path: Path) -> list[list[str]]:
    """Whitespace tokens of every non-empty line."""
    if not path.is_file():
        raise DataError(f"ptb: missing {path}; get {WHERE} and put the three files in "
                        f"{path.parent}")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [ln.split() for ln in lines if ln.strip()]


def build_vocab(sentences: list[list[str]]) -> list[str]:
    """Specials first, then words by decreasing count, ties alphabetically (deterministic)."""
    counts = Counter(w for s in sentences for w in s)
    for special in (PAD, BOS, EOS):
        counts.pop(special, None)
    words = sorted(counts, key=lambda w: (-counts[w], w))
    if UNK not in counts:
        words.append(UNK)
    return [PAD, BOS, EOS, *words]


def encode(sentences: list[list[str]], vocab: list[str], length: int) -> torch.Tensor:
    """``(N, length)`` int64: ``<s> ids </s>`` then ``<pad>``; unknown words → ``<unk>``."""
    index = {w: i for i, w in enumerate(vocab)}
    unk = index[UNK]
    rows = []
    for s in sentences:
        ids = [BOS_ID, *(index.get(w, unk) for w in s), EOS_ID][:length]
        rows.append(ids + [PAD_ID] * (length - len(ids)))
    return torch.tensor(rows, dtype=torch.int64).reshape(len(sentences), length)


def decode(ids: torch.Tensor, vocab: list[str]) -> list[str]:
    """Token-id rows → sentences (without ``<s>``, cut at the first ``</s>`` or ``<pad>``)."""
    out = []
    for row in ids.tolist():
        words = []
        for i in row[1:] if row and row[0] == BOS_ID else row:
            if i in (EOS_ID, PAD_ID):
                break
            words.append(vocab[int(i)])
        out.append(" ".join(words))
    return out


def lengths(x: torch.Tensor) -> torch.Tensor:
    """Tokens per row that are not ``<pad>`` (``<s>`` and ``</s>`` included)."""
    return (x != PAD_ID).sum(1)


def trim(x: torch.Tensor) -> torch.Tensor:
    """Cut a padded batch to its longest row (fewer LSTM steps for a batch of short ones)."""
    return x[:, : max(int(lengths(x).max()), 2)]


@lru_cache(maxsize=4)
def _load(root: str, max_words: int | None, n_train: int | None) -> LoadedData:
    folder = Path(root) / "ptb"
    split = {name: read_sentences(folder / f"ptb.{name}.txt") for name in SPLITS}
    vocab = build_vocab(split["train"])
    train = split["train"]
    if max_words is not None:
        train = [s for s in train if len(s) <= max_words]
    if n_train is not None:
        train = train[:n_train]
    if not train:
        raise DataError("ptb: no training sentence left after data.max_words/data.n_train")
    length = max(len(s) for s in [*train, *split["valid"], *split["test"]]) + 2
    info = DataInfo(shape=(length,), kind="text", low=0.0, high=float(len(vocab) - 1))
    return LoadedData(train=encode(train, vocab, length), test=encode(split["test"], vocab, length),
                      info=info, extras={"valid": encode(split["valid"], vocab, length),
                                         "vocab": vocab})


def load_ptb(options: PtbOptions) -> LoadedData:
    root = resolve_data_dir(options.data_dir, "ptb")
    return _load(str(root), options.max_words, options.n_train)
