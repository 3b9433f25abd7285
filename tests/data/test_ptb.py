"""PTB tokenisation and vocabulary: a tiny corpus written here, and the real files' counts."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from shortrun.data.ptb import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    PtbOptions,
    decode,
    lengths,
    load_ptb,
    trim,
)
from shortrun.errors import DataError

TRAIN = " the cat sat \n the dog <unk> \n\n a cat \n"
VALID = " the cat \n"
TEST = " a bird sat on the cat \n"


def write_corpus(root: Path, skip: str | None = None) -> Path:
    (root / "ptb").mkdir(parents=True)
    for split, text in (("train", TRAIN), ("valid", VALID), ("test", TEST)):
        if split != skip:
            (root / "ptb" / f"ptb.{split}.txt").write_text(text)
    return root


def test_vocabulary_ids_and_padding_on_a_tiny_corpus(tmp_path):
    d = load_ptb(PtbOptions(data_dir=str(write_corpus(tmp_path))))
    vocab = d.extras["vocab"]
    # specials, then by count (cat, the: 2 each, alphabetical tie), then the count-1 words.
    assert vocab == ["<pad>", "<s>", "</s>", "cat", "the", "<unk>", "a", "dog", "sat"]
    assert (PAD_ID, BOS_ID, EOS_ID) == (0, 1, 2)
    # empty line dropped; longest sentence is test's 6 words → L = 8.
    assert d.train.shape == (3, 8) and d.train.dtype == torch.int64
    assert d.info.shape == (8,) and d.info.kind == "text" and d.info.high == len(vocab) - 1
    assert d.train[0].tolist() == [1, 4, 3, 8, 2, 0, 0, 0]
    # "bird" and "on" are not in the train vocabulary → <unk> (id 5).
    assert d.test[0].tolist() == [1, 6, 5, 8, 5, 4, 3, 2]
    assert d.extras["valid"][0].tolist() == [1, 4, 3, 2, 0, 0, 0, 0]
    assert decode(d.train, vocab) == ["the cat sat", "the dog <unk>", "a cat"]
    assert lengths(d.train).tolist() == [5, 5, 4]
    assert trim(d.train).shape == (3, 5)


def test_max_words_and_n_train_filter_the_training_split_only(tmp_path):
    root = str(write_corpus(tmp_path))
    d = load_ptb(PtbOptions(data_dir=root, max_words=2))
    assert decode(d.train, d.extras["vocab"]) == ["a cat"]
    assert d.test.shape[0] == 1
    assert load_ptb(PtbOptions(data_dir=root, n_train=1)).train.shape[0] == 1
    with pytest.raises(DataError, match="no training sentence left"):
        load_ptb(PtbOptions(data_dir=root, max_words=1))


def test_missing_file_names_the_file_and_where_to_get_it(tmp_path):
    root = write_corpus(tmp_path, skip="valid")
    with pytest.raises(DataError, match=r"missing .*ptb\.valid\.txt.*Mikolov"):
        load_ptb(PtbOptions(data_dir=str(root)))


def test_real_ptb_counts_match_the_data_readme(data_dir):
    d = load_ptb(PtbOptions(data_dir=str(data_dir)))
    # shared/data/README.md: 42068 / 3370 / 3761 lines, 887521 / 70390 / 78669 tokens.
    for x, lines, tokens in ((d.train, 42068, 887521), (d.extras["valid"], 3370, 70390),
                             (d.test, 3761, 78669)):
        assert x.shape[0] == lines
        assert int((lengths(x) - 2).sum()) == tokens
    # Mikolov's 10k vocabulary counts its end-of-sentence marker; here that is </s>:
    # 9,999 word types (with <unk>) + <pad>, <s>, </s>.
    assert len(d.extras["vocab"]) == 10002
    assert not bool((d.test == d.extras["vocab"].index("<unk>")).all())
