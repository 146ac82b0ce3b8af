"""A character-level tokenizer for SMILES, built in code (no download)."""

from __future__ import annotations

from typing import Any

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
# Every character of organic-subset, bracket-atom, bond, ring and stereo SMILES syntax.
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789()[]=#$:/\\@+-.%*"


def build_tokenizer() -> Any:
    """A `PreTrainedTokenizerFast` with one token per character and PAD/BOS/EOS/UNK."""
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, BOS, EOS, UNK]
    vocab = {token: i for i, token in enumerate([*specials, *ALPHABET])}
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()  # characters join back without spaces
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
    )
    return tokenizer
