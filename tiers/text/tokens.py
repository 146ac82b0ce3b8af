"""Counting a text's length in a model's tokens, with the tokenizer a policy names.

A name is a local path (a `tokenizer.json` file, or a folder holding one: what
`save_pretrained` writes) or a Hugging Face hub id already in the local cache (`HF_HUB_CACHE`):
nothing is ever downloaded. Loaded with the `tokenizers` library (the `text` extra), once per
process and name.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any


class TokenizerUnavailable(Exception):
    """The named tokenizer cannot be loaded here; the message says why and what to do."""


def _tokenizer_file(name: str) -> Path:
    path = Path(name).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if (path / "tokenizer.json").is_file():
            return path / "tokenizer.json"
        raise TokenizerUnavailable(f"tokenizer {name!r}: the folder has no tokenizer.json")
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        raise TokenizerUnavailable(
            f"tokenizer {name!r} is not a local file or folder, and huggingface_hub (to read the "
            "hub cache) is not installed"
        ) from None
    try:
        cached = try_to_load_from_cache(name, "tokenizer.json")
    except ValueError as exc:  # not a valid repo id
        raise TokenizerUnavailable(f"tokenizer {name!r}: not a path or hub id ({exc})") from None
    if isinstance(cached, str):
        return Path(cached)
    raise TokenizerUnavailable(
        f"tokenizer {name!r} is not a local path and not in the local Hugging Face cache "
        "(nothing is downloaded): put its tokenizer.json on the workers and name that path"
    )


@lru_cache(maxsize=16)
def load_tokenizer(name: str) -> Any:
    """The `tokenizers.Tokenizer` named `name`, or TokenizerUnavailable saying why not."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise TokenizerUnavailable(
            f"tokenizer {name!r} needs the tokenizers library: "
            "pip install 'verifier-service[server,text]'"
        ) from None
    path = _tokenizer_file(name)
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # the library raises plain Exception on a bad file
        message = f"tokenizer {name!r}: {path} could not be read ({exc})"
        raise TokenizerUnavailable(message) from None


def count_tokens(name: str, text: str) -> int:
    """Tokens of `text` under tokenizer `name`, special tokens (BOS/EOS) not added."""
    return len(load_tokenizer(name).encode(text, add_special_tokens=False).ids)
