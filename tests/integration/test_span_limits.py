"""Hostile values are refused per span, alike on SQLite and PostgreSQL: a value over a limit, a
NUL character or a lone surrogate rejects its span alone (OTLP partial success, 200); the good
spans of the same request are stored and the read API keeps answering."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx
import pytest

from collector.api import create_app
from collector.otlp._limits import MAX_IDENTITY_CHARS, MAX_VALUE_CHARS
from collector.pipeline import Pipeline
from collector.settings import Settings
from collector.storage import Store
from instrument import semconv as sc
from tests.conftest import BACKENDS

_ids = itertools.count(1)


def _attr(key: str, value: Any) -> dict[str, Any]:
    if isinstance(value, int):
        return {"key": key, "value": {"intValue": str(value)}}
    return {"key": key, "value": {"stringValue": value}}


def _span(name: str, **attrs: Any) -> dict[str, Any]:
    n = next(_ids)
    return {
        "traceId": f"{n:032x}",
        "spanId": f"{n:016x}",
        "name": name,
        "startTimeUnixNano": str(1_700_000_000_000_000_000 + n * 10**9),
        "endTimeUnixNano": str(1_700_000_000_500_000_000 + n * 10**9),
        "attributes": [_attr(k, v) for k, v in attrs.items()],
    }


def _body(job: str, spans: list[dict[str, Any]]) -> bytes:
    resource = {"attributes": [_attr(sc.JOB_ID, job), _attr(sc.ATTEMPT, 0), _attr(sc.RANK, 0)]}
    request = {"resourceSpans": [{"resource": resource, "scopeSpans": [{"spans": spans}]}]}
    return json.dumps(request).encode()  # ensure_ascii: a lone surrogate becomes \\udXXX


HOSTILE = {
    "long model": {sc.MODEL: "m" * (MAX_IDENTITY_CHARS + 1)},
    "long team": {sc.TEAM: "t" * 4096},
    "long job id": {sc.JOB_ID: "j" * 3000},
    "long component": {sc.COMPONENT: "c" * 300},
    "long value": {"user.note": "v" * (MAX_VALUE_CHARS + 1)},
    "NUL in job id": {sc.JOB_ID: "bad\x00job"},
    "NUL in value": {"user.note": "a\x00b"},
    "surrogate in model": {sc.MODEL: "dlrm\ud800"},
    "surrogate in key": {"user.\udc00": "x"},
    "attempt past int32": {sc.ATTEMPT: 2**40},  # PostgreSQL's integer column refused it
    "rank past int64": {sc.RANK: 2**64 - 1},  # SQLite's refused it
}


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_hostile_spans_are_rejected_alone(database_url: str) -> None:
    store = Store(database_url)
    store.upgrade()
    pipeline = Pipeline(store, settle_s=0)
    app = create_app(Settings(db_url=database_url), pipeline)

    good = [
        _span(sc.SPAN_EVAL, **{sc.MODEL: "dlrm", sc.TEAM: "ads"}),
        _span(sc.SPAN_EVAL, **{sc.MODEL: "d" * MAX_IDENTITY_CHARS, "user.note": "é" * 100}),
    ]
    bad = [_span(sc.SPAN_EVAL, **attrs) for attrs in HOSTILE.values()]
    bad.append(_span("n" * (MAX_IDENTITY_CHARS + 1)))
    body = _body("limits-job", [good[0], *bad, good[1]])

    async def run() -> tuple[httpx.Response, list[httpx.Response]]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            posted = await client.post(
                "/v1/traces", content=body, headers={"content-type": "application/json"}
            )
            await asyncio.to_thread(pipeline.recompute_dirty)
            reads = [
                await client.get(path)
                for path in (
                    "/api/v1/jobs",
                    "/api/v1/jobs/limits-job",
                    "/api/v1/lost-time?group_by=model",
                    "/readyz",
                )
            ]
            return posted, reads

    try:
        posted, reads = asyncio.run(run())
        assert posted.status_code == 200, posted.text
        partial = posted.json()["partialSuccess"]
        assert int(partial["rejectedSpans"]) == len(bad)
        assert "limit" in partial["errorMessage"]
        assert store.span_counts()["spans"] == len(good)
        assert store.job_ids() == ["limits-job"]
        for read in reads:
            assert read.status_code == 200, (read.request.url, read.text)
        assert reads[1].json()["job_id"] == "limits-job"
    finally:
        store.close()


@pytest.mark.parametrize("database_url", BACKENDS, indirect=True)
def test_every_hostile_kind_names_its_reason(database_url: str) -> None:
    """Each hostile span alone: rejected with a reason of its own, nothing stored."""
    store = Store(database_url)
    store.upgrade()
    app = create_app(Settings(db_url=database_url), Pipeline(store))

    async def post_each() -> list[httpx.Response]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return [
                await client.post(
                    "/v1/traces",
                    content=_body("one-job", [_span(sc.SPAN_EVAL, **attrs)]),
                    headers={"content-type": "application/json"},
                )
                for attrs in HOSTILE.values()
            ]

    try:
        answers = asyncio.run(post_each())
        for kind, answer in zip(HOSTILE, answers, strict=True):
            assert answer.status_code == 200, (kind, answer.text)
            partial = answer.json()["partialSuccess"]
            assert int(partial["rejectedSpans"]) == 1, kind
            message = partial["errorMessage"]
            word = "NUL" if "NUL" in kind else "surrogate" if "surrogate" in kind else "limit"
            assert word in message, (kind, message)
        assert store.span_counts()["spans"] == 0
    finally:
        store.close()
