"""From what a policy model wrote to the items the service scores.

A mapping is a callable `(prompt, completion, row) -> item dict`: `prompt` and `completion` are the
texts, `row` holds the dataset columns of that sample (TRL), `ground_truth` and `extra_info` (verl)
or `label` (OpenRLHF). Two ready ones: `SmilesMapping` and `CodeMapping`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from verifier_service.wire.rewards import Reward

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\n(.*?)```", re.DOTALL)
_SMILES_TAG = re.compile(r"<smiles>(.*?)</smiles>", re.DOTALL | re.IGNORECASE)
_STRIP = "`'\".,;:!?()[]{}<>"
_SMILES_CHARS = re.compile(r"^[A-Za-z0-9@+\-\[\]\(\)=#$:/\\%.*]+$")


class ItemMapping(Protocol):
    """Turns one prompt, its completion and its dataset row into one reward API item."""

    def __call__(self, prompt: str, completion: str, row: Mapping[str, Any]) -> dict[str, Any]: ...


def message_text(value: Any) -> str:
    """Plain text of a completion or prompt: a string, or the last message of a conversation."""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence) and value and isinstance(value[-1], Mapping):
        content = value[-1].get("content", "")
        if isinstance(content, str):
            return content
        # Content blocks: keep the text parts.
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return "" if value is None else str(value)


def _parses(smiles: str) -> bool:
    if not smiles or not _SMILES_CHARS.match(smiles):
        return False
    try:
        from rdkit import Chem, rdBase
    except ModuleNotFoundError:
        # The client installs without RDKit: take the first text made of SMILES characters
        # and let the service's chem.fast tier say whether it parses.
        return True
    with rdBase.BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
    return mol is not None and mol.GetNumAtoms() > 0


def extract_smiles(text: str) -> str | None:
    """The SMILES in free text: a `<smiles>` tag, a fenced block, the whole text, or the first
    whitespace-separated token that RDKit parses; None when nothing parses. Without RDKit in the
    trainer's environment: the first of those made only of SMILES characters."""
    candidates: list[str] = [m.group(1).strip() for m in _SMILES_TAG.finditer(text)]
    candidates += [m.group(2).strip() for m in _FENCE.finditer(text)]
    candidates.append(text.strip())
    candidates += [token.strip(_STRIP) for token in text.split()]
    for candidate in candidates:
        if _parses(candidate):
            return candidate
    return None


def extract_code(text: str, language: str = "python") -> str:
    """The code in a completion: the first fenced block in `language` (or with no language),
    else the first fenced block, else the whole text."""
    blocks = [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]
    for tag, body in blocks:
        if tag in ("", language.lower(), {"python": "py"}.get(language.lower(), "")):
            return body
    if blocks:
        return blocks[0][1]
    return text


# -- Texts as frameworks hand them over -------------------------------------------------------

#: Special-token texts that tokenizers of common chat models decode into a text when asked to keep
#: special tokens (OpenRLHF's agent executor does): end of turn/sequence, begin of sequence,
#: padding. None of them can be part of a SMILES or of a program's meaning.
DEFAULT_SPECIAL_TOKENS: tuple[str, ...] = (
    "<|im_end|>",
    "<|im_start|>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<|begin_of_text|>",
    "<|eot_id|>",
    "<|end|>",
    "<|eom_id|>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>",
    "<\uff5cbegin\u2581of\u2581sentence\uff5c>",
    "<end_of_turn>",
    "<start_of_turn>",
    "</s>",
    "<s>",
    "<eos>",
    "<bos>",
    "<pad>",
    "<|pad|>",
    "[PAD]",
    "[CLS]",
    "[SEP]",
)


def strip_special_tokens(
    text: str, tokens: Sequence[str] = DEFAULT_SPECIAL_TOKENS
) -> tuple[str, int]:
    """`text` without the special tokens at its start and end (repeated, with the whitespace
    between them), and how many were removed. Tokens inside the text are left alone."""
    ordered = sorted((t for t in tokens if t), key=len, reverse=True)
    removed = 0
    changed = True
    while changed:
        changed = False
        stripped = text.strip()
        for token in ordered:
            if stripped.startswith(token):
                text, removed, changed = stripped[len(token) :], removed + 1, True
                break
            if stripped.endswith(token):
                text, removed, changed = stripped[: -len(token)], removed + 1, True
                break
    return text.strip() if removed else text, removed


#: How `split_response` found the response: the prompt as a prefix, the prompt further in (text
#: such as a BOS in front), the tail of a prompt cut at its start, or not at all (whole query).
PROMPT_FOUND = {"prefix": 1.0, "inside": 2.0, "cut": 3.0, "none": 0.0}
_CUT_MIN = 16  # the shortest prompt tail trusted to mark where the response starts


def split_response(query: str, prompt: str | None) -> tuple[str, str]:
    """The response in `query` (prompt + response, as a framework joins them) and how the prompt
    was found (a key of PROMPT_FOUND).

    In order: the prompt in front of the query; the prompt inside the query, after text the
    framework put in front (a BOS, a system header), the response being what follows its first
    occurrence; the query starting with the end of a prompt whose start was cut off (a left-
    truncated prompt, at least 16 characters of it); else the whole query.
    """
    if not prompt:
        return query, "none"
    if query.startswith(prompt):
        return query[len(prompt) :], "prefix"
    at = query.find(prompt)
    if at >= 0:
        return query[at + len(prompt) :], "inside"
    if len(prompt) > _CUT_MIN:
        tail = prompt[-_CUT_MIN:]
        at = query.find(tail)
        while at >= 0:
            end = at + _CUT_MIN
            if prompt.endswith(query[:end]):
                return query[end:], "cut"
            at = query.find(tail, at + 1)
    return query, "none"


def group_key(prompt: str, step: int | None = None) -> str:
    """A GRPO group name: completions of the same prompt (in the same step) share it."""
    digest = hashlib.sha256(prompt.encode()).hexdigest()[:16]
    return digest if step is None else f"{step}:{digest}"


@dataclass(frozen=True)
class SmilesMapping:
    """A completion that writes a molecule -> a `molecule` item.

    The SMILES is `extract_smiles(completion)`; when nothing parses, the stripped completion is
    sent as it is, so the service scores it as an invalid molecule (a low reward, not a gap).
    `reference_column` names a row column of reference SMILES (one string or a list).
    """

    reference_column: str | None = None

    def __call__(self, prompt: str, completion: str, row: Mapping[str, Any]) -> dict[str, Any]:
        del prompt  # the molecule is in the completion alone
        smiles = extract_smiles(completion)
        item: dict[str, Any] = {
            "kind": "molecule",
            "payload": {"smiles": smiles if smiles is not None else completion.strip()},
        }
        reference = row.get(self.reference_column) if self.reference_column else None
        if reference:
            item["reference"] = {"smiles": [reference] if isinstance(reference, str) else reference}
        return item


@dataclass(frozen=True)
class CodeMapping:
    """A completion that writes a program -> a `code` item judged by the row's tests."""

    tests_column: str = "tests"
    setup_column: str | None = None
    language: str = "python"
    timeout_s: float | None = None

    def __call__(self, prompt: str, completion: str, row: Mapping[str, Any]) -> dict[str, Any]:
        del prompt  # the program is in the completion alone
        payload: dict[str, Any] = {
            "language": self.language,
            "code": extract_code(completion, self.language),
            "tests": str(row.get(self.tests_column) or ""),
        }
        if self.setup_column and row.get(self.setup_column):
            payload["setup"] = str(row[self.setup_column])
        if self.timeout_s is not None:
            payload["timeout_s"] = self.timeout_s
        return {"kind": "code", "payload": payload}


@dataclass(frozen=True)
class TextMapping:
    """A completion in words -> a `text` item whose reference answer is a row column (verl's
    `ground_truth`, a dataset's `answer`); the policy's `answer` tier finds the final answer."""

    reference_column: str = "answer"

    def __call__(self, prompt: str, completion: str, row: Mapping[str, Any]) -> dict[str, Any]:
        del prompt  # the answer is in the completion alone
        item: dict[str, Any] = {"kind": "text", "payload": {"text": completion}}
        reference = row.get(self.reference_column)
        if reference is not None:
            item["reference"] = {"answer": reference}
        return item


MAPPINGS: dict[str, ItemMapping] = {
    "molecule": SmilesMapping(),
    "code": CodeMapping(),
    "text": TextMapping(),
}


def with_group(item: dict[str, Any], group: str) -> dict[str, Any]:
    """The item with metadata.group set (kept when the mapping set one already)."""
    metadata = dict(item.get("metadata") or {})
    metadata.setdefault("group", group)
    return {**item, "metadata": metadata}


# -- Per-step rewards of multi-turn rollouts --------------------------------------------------


def trajectory_item(
    turns: Sequence[Mapping[str, Any]],
    action: ItemMapping,
    *,
    row: Mapping[str, Any] | None = None,
    final_answer: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A multi-turn chat rollout -> a `trajectory` item.

    Each assistant message becomes one step, its action made by `action` from the message text;
    the tool or user messages that follow it, joined, are that step's observation. System and
    leading user messages are the prompt and are not steps.
    """
    steps: list[dict[str, Any]] = []
    prompt_parts: list[str] = []
    for turn in turns:
        role, text = turn.get("role"), message_text([turn])
        if role == "assistant":
            prompt = "\n".join(prompt_parts)
            steps.append({"action": action(prompt, text, row or {})})
        elif steps:
            previous = steps[-1].get("observation")
            steps[-1]["observation"] = text if previous is None else f"{previous}\n{text}"
        else:
            prompt_parts.append(text)
    if not steps:
        raise ValueError("the rollout has no assistant turn to score")
    item: dict[str, Any] = {"kind": "trajectory", "steps": steps}
    if final_answer is not None:
        item["final_answer"] = final_answer
    return item


def token_rewards(
    reward: Reward, step_ends: Sequence[int], n_tokens: int, *, missing: float = 0.0
) -> list[float]:
    """Dense per-token rewards of a multi-turn rollout from a trajectory's reward.

    `step_ends[i]` is the index of the last token of the i-th assistant turn in the rollout's
    response tokens. Step i's reward sits on that token; the outcome reward (or, without one, the
    scalar `value`) is added on the last token of the last turn; every other token gets 0. Steps the
    service could not score (None) get `missing`. This is the process-reward layout that PPO-style
    trainers (verl's token-level scores, OpenRLHF's process rewards) read.
    """
    steps = reward.step_rewards or []
    if len(steps) != len(step_ends):
        raise ValueError(f"{len(steps)} step rewards for {len(step_ends)} assistant turns")
    dense = [0.0] * n_tokens
    for value, end in zip(steps, step_ends, strict=True):
        dense[end] += missing if value is None else value
    final = reward.outcome_reward if reward.outcome_reward is not None else None
    if final is not None and step_ends:
        dense[step_ends[-1]] += final
    return dense
