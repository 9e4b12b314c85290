"""One rule for Young's optimum everywhere: below ``MIN_ADVICE_FAILURES`` failures ``ett report``,
``ett checkpoint-advice`` and the API (``advice_ok``) withhold it."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from ett_collector import schemas
from ett_collector.commands import _render
from ett_collector.commands.overview_commands import print_advice


def _row(model: str, failures: int, optimal_s: float) -> dict[str, Any]:
    return {
        "model": model,
        "jobs": 1,
        "failures": failures,
        "failures_per_day": 2.0,
        "mean_blocking_s": 4.0,
        "interval_s": 600.0,
        "optimal_interval_s": optimal_s,
        "advice_ok": schemas.advice_ok(failures),
    }


def test_report_uses_the_shared_rule() -> None:
    needed = schemas.MIN_ADVICE_FAILURES
    assert _render.advice_ok is schemas.advice_ok  # the report applies the shared rule
    assert not schemas.advice_ok(needed - 1) and schemas.advice_ok(needed)


def test_checkpoint_advice_withholds_an_optimum_on_too_few_failures() -> None:
    needed = schemas.MIN_ADVICE_FAILURES
    few, many = _row("few", needed - 1, 91.0), _row("many", needed, 1234.0)
    job = {"job_id": "j-few", "model": "few", "interval_s": 600.0}
    data = {
        "models": [few, many],
        "jobs": [job | {"optimal_interval_s": 91.0, "saving_s": 50.0, "advice_ok": False}],
        "min_failures": needed,
    }
    out = io.StringIO()
    print_advice(data, Console(file=out, width=200))
    text = out.getvalue()
    assert f"not enough failures yet ({needed - 1} of {needed})" in text
    assert _render.duration(91.0) not in text  # neither in the model's row nor as a job
    assert "j-few" not in text
    assert _render.duration(1234.0) in text


def test_the_pooled_optimum_is_youngs_over_the_models_jobs() -> None:
    """A model's optimum pools its jobs' blocking, training and failures into the figures' one
    formula: ``sqrt(2 B T / F)`` with B the mean blocking per checkpoint over all the jobs."""
    import math

    from ett_collector.storage._advice import _model_row

    jobs = [
        {
            "failures": 2,
            "training_s": 36_000.0,
            "checkpoints": 10,
            "mean_blocking_s": 6.0,
            "interval_s": 1800.0,
            "ranks": 4,
        },
        {
            "failures": 1,
            "training_s": 18_000.0,
            "checkpoints": 30,
            "mean_blocking_s": 2.0,
            "interval_s": 600.0,
            "ranks": 8,
        },
    ]
    row = _model_row("m", jobs)
    mean_b = (6.0 * 10 + 2.0 * 30) / 40
    assert row["mean_blocking_s"] == mean_b
    assert row["optimal_interval_s"] == math.sqrt(2 * mean_b * 54_000.0 / 3)
    assert _model_row("m", [{**jobs[0], "failures": 0}])["optimal_interval_s"] is None


def test_a_publishing_job_is_not_counted_among_a_models_jobs(tmp_path) -> None:
    """A standalone publishing job never trains, saves or fails: checkpoint advice has nothing
    to say of it, and it is not one of its model's jobs there."""
    from ett import semconv as sc
    from ett_collector.storage import Store
    from ett_collector.write.pipeline import Pipeline
    from tests.support.spans import span
    from tests.support.worked_example import worked_example

    store = Store(f"sqlite:///{tmp_path / 'a.db'}")
    store.upgrade()
    pipeline = Pipeline(store)
    pipeline.ingest(worked_example("train-1"))
    pipeline.recompute_dirty()
    model = (store.get_job("train-1") or {})["model"]
    publish = {sc.PUBLISH_STANDALONE: True, sc.MODEL: model}
    pipeline.ingest([span(sc.SPAN_PUBLISH, 1.0e9, 1.0e9 + 60, job="publish-1", **publish)])
    pipeline.recompute_dirty()
    assert store.get_job("publish-1") is not None

    advice = store.checkpoint_advice(None, None, None)

    (row,) = [m for m in advice["models"] if m["model"] == model]
    assert row["jobs"] == 1
    assert [j["job_id"] for j in advice["jobs"]] == ["train-1"]
    store.close()
