"""Calibration of a model judge against people through real processes: items under the shipped
qa-judge policy go from the answer match to `judge.llm` (the FAULT-INJECTION STUB of the OpenAI
protocol, tests/tiers/judge/judge_stub.py, run as a process, answering each item with a label
this test chose) and, the judge being unsure, to people, who answer over the review API with
scores this test chose. Two more policies send every item from `judge.prm` (a step's label)
and from `judge.rank` (a GRPO group's order, the same in both orders) to people. The
calibration JSON and page then say what a hand computation on those lists of scores says:
agreement, Spearman, confusion, by day, one judge per tier."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from judge_console_support import (
    answer_reviews,
    calibration,
    completed,
    judge_service,
    make_operator,
    reply,
    shot,
    signed_in,
)
from scipy.stats import spearmanr
from support import Service

LABEL_SCORE = {"correct": 1.0, "partially_correct": 0.5, "incorrect": 0.0}
#: Per item: the judge's label (said unsure: confidence 0.5, so people are asked) and the
#: score people give.
CASES = [
    ("correct", 1.0),
    ("correct", 1.0),
    ("correct", 0.0),  # the judge good, people bad
    ("incorrect", 0.0),
    ("incorrect", 1.0),  # the judge bad, people good
    ("partially_correct", 1.0),
    ("incorrect", 0.0),
    ("correct", 0.2),  # the judge good, people bad
    ("partially_correct", 0.0),  # the judge good at 0.5, people bad
]
#: judge.prm: per one-step text, the judge's label and people's score.
PRM_CASES = [("good", 1.0), ("bad", 1.0), ("neutral", 0.0), ("good", 0.0)]
PRM_SCORE = {"good": 1.0, "neutral": 0.5, "bad": 0.0}
#: judge.rank: one group of four, ranked a > b > c > d in both orders (places 1..4: scores 1,
#: 2/3, 1/3, 0), and people's scores of a, b, c, d.
RANK_PEOPLE = [1.0, 0.0, 1.0, 0.0]
RANK_SCORES = [1.0, 2 / 3, 1 / 3, 0.0]
PEOPLE: dict[str, Any] = {
    "tier": "human",
    "config": {
        "rubric": {"dimensions": [{"name": "correct", "type": "score", "min": 0, "max": 1}]},
        "overlap": 1,
    },
}
PRM_POLICY = {
    "name": "cal-prm",
    "ladders": {"text": [
        {"tier": "judge.prm", "config": {"endpoint": "judge", "rubric": {
            "criteria": "Is this step right?",
            "labels": {"values": ["good", "neutral", "bad"], "passing": ["good", "neutral"],
                       "scores": {"neutral": 0.5}},
        }}},
        {**PEOPLE, "gate": "'judge.prm' in verdicts",
         "config": {**PEOPLE["config"], "queue": "cal-prm"}},
    ]},
}  # fmt: skip
RANK_POLICY = {
    "name": "cal-rank",
    "ladders": {"text": [
        {"tier": "judge.rank", "config": {"endpoint": "judge", "criteria": "Which is right?"}},
        {**PEOPLE, "gate": "'judge.rank' in verdicts",
         "config": {**PEOPLE["config"], "queue": "cal-rank"}},
    ]},
}  # fmt: skip


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A service whose judge was unsure of every item of CASES, and people who answered."""
    tag = uuid.uuid4().hex[:6]
    rules = [
        {"match": f"case-{tag}-{i}\\b", "content": reply(label, 0.5)}
        for i, (label, _) in enumerate(CASES)
    ]
    rules += [
        {"match": f"prm-{tag}-{i}\\b", "content": reply(label, 0.9)}
        for i, (label, _) in enumerate(PRM_CASES)
    ]
    ranked = {"a": "ABCD", "d": "DCBA"}  # shown a..d, or d..a (the swap): a first each time
    rules += [
        {"match": f"rank-{tag}-{first}[\\s\\S]*rank-{tag}-{last}",
         "content": json.dumps({"ranking": list(ranked[first]), "reasoning": "as planned"})}
        for first, last in (("a", "d"), ("d", "a"))
    ]  # fmt: skip
    with judge_service(tmp_path_factory, "cjudge", rules) as (service, _):
        yield _run(service, tag)


def _run(service: Service, tag: str) -> dict[str, Any]:
    operator = make_operator(service, tag)
    texts = [f"<answer>Lutetia, case-{tag}-{i}</answer>" for i in range(len(CASES))]
    sure = f"<answer>Lutetia, sure-{tag}</answer>"  # the judge is sure: never reaches people
    items = [
        {"kind": "text", "payload": {"text": t}, "reference": {"answer": "Paris"},
         "metadata": {"question": "What is the capital of France?"}}
        for t in [*texts, sure]
    ]  # fmt: skip
    prm_texts = [f"So the answer is 4, prm-{tag}-{i}." for i in range(len(PRM_CASES))]
    rank_texts = [f"Paris, rank-{tag}-{m}." for m in "abcd"]
    people = {t: score for t, (_, score) in zip(texts, CASES, strict=True)}
    people |= {t: score for t, (_, score) in zip(prm_texts, PRM_CASES, strict=True)}
    people |= dict(zip(rank_texts, RANK_PEOPLE, strict=True))
    jobs = {
        "qa-judge": items,
        "cal-prm": [{"kind": "text", "payload": {"text": t}} for t in prm_texts],
        "cal-rank": [
            {"kind": "text", "payload": {"text": t}, "metadata": {"group": f"g-{tag}"}}
            for t in rank_texts
        ],
    }
    reviewer_key = service.create_key(f"rv-{tag}", "reviewer")
    with service.client(timeout=60) as trainer, service.client(api_key=reviewer_key) as reviewer:
        for document in (PRM_POLICY, RANK_POLICY):
            created = trainer.post("/v1/policies", json={"document": document})
            assert created.status_code == 201, created.text
        locations: dict[str, str] = {}
        for policy, posted in jobs.items():
            created = trainer.post(
                "/v1/rewards", json={"policy": policy, "items": posted, "wait_s": 0}
            )
            assert created.status_code == 202, created.text
            locations[policy] = created.headers["location"]
        deadline = time.monotonic() + 120
        answer_reviews(
            reviewer, ["qa-answers", "cal-prm", "cal-rank"], people, deadline,
            lambda: [trainer.get(u).text for u in locations.values()],
        )  # fmt: skip
        done = {p: completed(trainer, u, deadline) for p, u in locations.items()}
    return {"service": service, "operator": operator, "job": done["qa-judge"], "jobs": done,
            "texts": texts}  # fmt: skip


def _hand(
    cut: float,
    judge: list[float] | None = None,
    people: list[float] | None = None,
) -> dict[str, Any]:
    """The figures computed by hand from two lists of scores (by default CASES')."""
    judge = judge if judge is not None else [LABEL_SCORE[label] for label, _ in CASES]
    people = people if people is not None else [score for _, score in CASES]
    good = [(j >= cut, p >= cut) for j, p in zip(judge, people, strict=True)]
    return {
        "pairs": len(people),
        "agreement": sum(1 for a, b in good if a == b) / len(people),
        "spearman": spearmanr(judge, people).statistic,
        "confusion": {
            "both_good": good.count((True, True)),
            "judge_good_people_bad": good.count((True, False)),
            "judge_bad_people_good": good.count((False, True)),
            "both_bad": good.count((False, False)),
        },
    }


def _judge(body: dict[str, Any], policy: str = "qa-judge") -> dict[str, Any]:
    found: list[dict[str, Any]] = [j for j in body["judges"] if j["policy"] == policy]
    assert len(found) == 1, body["judges"]
    return found[0]


def test_the_judge_calibration_is_the_hand_computation(judged: dict[str, Any]) -> None:
    # The job's own verdicts are the scores this test planned (people's 0..1 as given).
    *cases, sure = judged["job"]["items"]  # in the order posted
    assert [v["tier"] for v in sure["verdicts"]] == ["answer", "judge.llm"]
    for item, (label, score) in zip(cases, CASES, strict=True):
        verdicts = {v["tier"]: v for v in item["verdicts"]}
        assert verdicts["judge.llm"]["score"] == LABEL_SCORE[label]
        assert verdicts["human"]["score"] == pytest.approx(score)
    judge = _judge(calibration(judged["service"]))
    hand = _hand(0.5)
    assert judge["tier"] == "judge.llm"
    assert (judge["endpoint"], judge["model"], judge["version"]) == ("judge", "stub-judge-7b", 1)
    assert (judge["judge_step"], judge["human_step"], judge["threshold"]) == (1, 2, 0.5)
    assert judge["pairs"] == hand["pairs"]  # the item the judge was sure of is not there
    assert judge["agreement"] == pytest.approx(hand["agreement"])
    assert judge["agreement"] == pytest.approx(5 / 9)
    assert judge["spearman"] == pytest.approx(hand["spearman"], abs=1e-9)
    assert judge["confusion"] == hand["confusion"]
    assert judge["confusion"] == {
        "both_good": 3, "judge_good_people_bad": 3, "judge_bad_people_good": 1, "both_bad": 2,
    }  # fmt: skip
    # Over time: the days of the window; every answer of today in today's row.
    days = [d for d in judge["days"] if d["pairs"]]
    assert len(days) == 1
    assert days[0]["pairs"] == hand["pairs"]
    assert days[0]["confusion"] == hand["confusion"]
    assert len(judge["days"]) == 2  # 24 hours span two UTC dates (today and yesterday)


def test_a_stricter_threshold_is_a_new_confusion(judged: dict[str, Any]) -> None:
    judge = _judge(calibration(judged["service"], threshold=0.75))
    hand = _hand(0.75)
    assert judge["threshold"] == 0.75
    assert judge["confusion"] == hand["confusion"]
    assert judge["agreement"] == pytest.approx(hand["agreement"])
    # The two partially_correct answers (0.5) are bad now: one agrees with people no more, the
    # other does now.
    assert judge["confusion"] == {
        "both_good": 2, "judge_good_people_bad": 2, "judge_bad_people_good": 2, "both_bad": 3,
    }  # fmt: skip


def test_the_prm_and_rank_judges_are_the_hand_computation(judged: dict[str, Any]) -> None:
    jobs = judged["jobs"]
    prm = [item["verdicts"][0]["score"] for item in jobs["cal-prm"]["items"]]
    assert prm == [PRM_SCORE[label] for label, _ in PRM_CASES]  # the stub answered as planned
    rank = [item["verdicts"][0]["score"] for item in jobs["cal-rank"]["items"]]
    assert rank == pytest.approx(RANK_SCORES)
    body = calibration(judged["service"])
    step = _judge(body, "cal-prm")
    hand = _hand(0.5, prm, [score for _, score in PRM_CASES])
    assert (step["tier"], step["model"], step["judge_step"], step["human_step"]) == (
        "judge.prm", "stub-judge-7b", 0, 1
    )  # fmt: skip
    assert (step["pairs"], step["threshold"]) == (4, 0.5)
    assert step["agreement"] == pytest.approx(hand["agreement"]) == pytest.approx(1 / 4)
    assert step["spearman"] == pytest.approx(hand["spearman"], abs=1e-9)
    assert step["confusion"] == hand["confusion"] == {
        "both_good": 1, "judge_good_people_bad": 2, "judge_bad_people_good": 1, "both_bad": 0,
    }  # fmt: skip
    group = _judge(body, "cal-rank")
    hand = _hand(0.5, RANK_SCORES, RANK_PEOPLE)
    assert (group["tier"], group["model"], group["pairs"]) == ("judge.rank", "stub-judge-7b", 4)
    assert group["agreement"] == pytest.approx(hand["agreement"]) == pytest.approx(1 / 2)
    assert group["spearman"] == pytest.approx(hand["spearman"], abs=1e-9)
    assert group["confusion"] == hand["confusion"] == {
        "both_good": 1, "judge_good_people_bad": 1, "judge_bad_people_good": 1, "both_bad": 1,
    }  # fmt: skip
    assert [d["pairs"] for d in group["days"] if d["pairs"]] == [4]


def test_the_page_shows_the_judge_against_people(
    judged: dict[str, Any], browser: Any, tmp_path: Path
) -> None:
    service: Service = judged["service"]
    judge = _judge(calibration(service))
    with signed_in(browser, service, judged["operator"]) as page:
        section = page.locator("section.judge[data-policy='qa-judge'][data-endpoint='judge']")
        heading = section.locator("h3").inner_text()
        assert "judge (stub-judge-7b)" in heading
        assert "qa-judge v1 templates" in heading
        assert section.get_attribute("data-tier") == "judge.llm"
        assert section.get_attribute("data-model") == "stub-judge-7b"
        assert section.locator(".judge-pairs").inner_text() == "9"
        assert section.locator(".judge-agreement").inner_text() == "55.6%"
        assert section.locator(".judge-rho").inner_text() == f"{judge['spearman']:.3f}"
        assert section.locator(".judge-wrong-good").inner_text() == "3"
        cells = section.locator("table.judge-confusion tbody td").all_inner_texts()
        assert [int(c) for c in cells] == [3, 3, 1, 2]
        rows = section.locator("table.judge-days tbody tr")
        assert rows.count() == 1
        day = rows.nth(0).locator("td").all_inner_texts()
        assert day[:3] == [judge["days"][-1]["day"], "9", "55.6%"]
        # One row per judge tier, each saying which tier it is.
        for tier, pairs in (("judge.prm", "4"), ("judge.rank", "4")):
            row = page.locator(f"section.judge[data-tier='{tier}'][data-model='stub-judge-7b']")
            assert row.locator(".judge-tier").inner_text() == tier
            assert row.locator(".judge-pairs").inner_text() == pairs
        rank = page.locator("section.judge[data-tier='judge.rank']")
        assert "relative to its group" in rank.locator(".reason").first.inner_text()
        # The by-day table scrolls on a phone; the keyboard reaches it.
        region = section.locator(".table-scroll")
        region.focus()
        assert page.evaluate("document.activeElement.getAttribute('role')") == "region"
        region.blur()
        shot(page, "console-calibration-judge.png", tmp_path)
        page.set_viewport_size({"width": 390, "height": 844})
        wide = page.evaluate("document.documentElement.scrollWidth")
        culprits = page.evaluate(
            "[...document.querySelectorAll('main *')].filter(e => e.getBoundingClientRect().right"
            " > 392).slice(0, 6).map(e => e.tagName + '.' + e.className + ' ' +"
            " Math.round(e.getBoundingClientRect().right))"
        )
        assert wide <= 390, (wide, culprits)  # nothing sticks out sideways on a phone
        section.scroll_into_view_if_needed()
        shot(page, "console-calibration-judge-390.png", tmp_path)
