"""SMILES tokenizers built in code (no download): one token per character, or per SMILES atom."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Literal

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
# Every character of organic-subset, bracket-atom, bond, ring and stereo SMILES syntax.
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789()[]=#$:/\\@+-.%*"
# One token per bracket atom ([nH], [N+], [C@@H]), two-letter organic atom (Cl, Br), two-digit
# ring bond (%10) or single character: the usual regex of SMILES language models.
ATOM_PATTERN = r"\[[^\]]+\]|Br|Cl|%[0-9]{2}|."
# The organic subset and the syntax around it: always in the atom-level vocabulary.
ATOM_BASE = [
    *("B", "C", "N", "O", "P", "S", "F", "Cl", "Br", "I", "b", "c", "n", "o", "p", "s"),
    *"()=#-+:/\\.@*%",
    *"0123456789",
]
# Printable ASCII and the space: questions, \boxed{}, short words.
TEXT_ALPHABET = "".join(chr(c) for c in range(32, 127))
TokenizerKind = Literal["char", "atom", "text"]


def atom_tokens(smiles: str) -> list[str]:
    """`smiles` split as the atom-level tokenizer splits it."""
    return re.findall(ATOM_PATTERN, smiles)


def _fast(vocab_tokens: Iterable[str], pattern: str) -> Any:
    from transformers import PreTrainedTokenizerFast

    specials = [PAD, BOS, EOS, UNK]
    vocab: dict[str, int] = {}
    for token in [*specials, *vocab_tokens]:
        vocab.setdefault(token, len(vocab))
    core = Tokenizer(models.WordLevel(vocab=vocab, unk_token=UNK))
    # The special tokens are added tokens: split off before this pre-tokenizer runs.
    core.pre_tokenizer = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    core.decoder = decoders.Fuse()  # tokens join back without spaces
    return PreTrainedTokenizerFast(
        tokenizer_object=core,
        pad_token=PAD,
        bos_token=BOS,
        eos_token=EOS,
        unk_token=UNK,
        padding_side="left",
    )


def build_tokenizer(kind: TokenizerKind = "char", corpus: Iterable[str] = ()) -> Any:
    """A `PreTrainedTokenizerFast` with PAD/BOS/EOS/UNK.

    `char`: one token per SMILES character; `text`: per printable ASCII character. `atom`: one
    per SMILES atom or bond symbol, with the bracket atoms found in `corpus` added to the
    vocabulary (others read as UNK).
    """
    if kind == "char":
        return _fast(ALPHABET, ".")
    if kind == "text":
        return _fast(TEXT_ALPHABET, ".")
    brackets = sorted({t for s in corpus for t in atom_tokens(s) if t.startswith("[")})
    rings = sorted({t for s in corpus for t in atom_tokens(s) if t.startswith("%")})
    return _fast([*ATOM_BASE, *brackets, *rings], ATOM_PATTERN)
