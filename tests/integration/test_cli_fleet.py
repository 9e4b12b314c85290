"""``ett fleet`` and ``ett checkpoint-advice`` answer what ``GET /api/v1/fleet`` and
``GET /api/v1/checkpoint-advice`` answer for the same question (one query layer), on a simulated
fleet in SQLite; the tables show the same figures; bad input is one line and exit 2."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from ett_cli import main
from ett_collector.api import create_app
from ett_collector.settings import Settings
from ett_collector.storage import Store
from ett_collector.write.pipeline import Pipeline
from ett_simulator import simulate_into_db

START = 1_790_000_000.0
SINCE, UNTIL = START + 6 * 3600, START + 2 * 86400


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("cli-fleet") / "collector.db"
    simulate_into_db(f"sqlite:///{path}", jobs=12, days=2, seed=5, start=START)
    return str(path)


def _api(db: str, path: str, **params: Any) -> Any:
    store = Store(f"sqlite:///{db}")
    app = create_app(Settings(db_url=f"sqlite:///{db}"), Pipeline(store))

    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://ett") as c:
            return await c.get(path, params=params)

    r = asyncio.run(go())
    store.close()
    assert r.status_code == 200, r.text
    return r.json()


def _cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize(
    "options",
    [
        {"by": "fleet"},
        {"by": "model", "bucket": "day"},
        {"by": "team", "bucket": "hour", "state": "completed", "limit": "3"},
    ],
    ids=lambda o: "-".join(o.values()),
)
def test_fleet_json_is_the_api_answer(
    db: str, capsys: pytest.CaptureFixture[str], options: dict[str, str]
) -> None:
    window = {"since": str(SINCE), "until": str(UNTIL)}
    argv = [f"--{k}={v}" for k, v in {**window, **options}.items()]
    code, out, _ = _cli(capsys, "fleet", "--json", "--db", db, *argv)
    assert code == 0
    cli_answer = json.loads(out)
    assert cli_answer == _api(db, "/api/v1/fleet", **window, **options)
    assert cli_answer["series"] and cli_answer["worst_jobs"]  # a question with an answer


def test_fleet_table_shows_the_api_figures(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    api = _api(db, "/api/v1/fleet", since=str(SINCE), until=str(UNTIL), by="model")
    code, out, _ = _cli(
        capsys, "fleet", "--db", db, "--since", str(SINCE), "--until", str(UNTIL), "--by", "model"
    )
    assert code == 0
    minute = lambda t: datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M")  # noqa: E731
    assert f"Fleet {minute(SINCE)} to {minute(UNTIL)} UTC:" in out  # the window as asked
    prod = sum(r["productive_s"] for r in api["series"])
    wall = sum(r["wall_s"] for r in api["series"])
    assert f"ETT {100 * prod / wall:.1f}%" in out
    for model in {r["key"] for r in api["series"]}:
        assert model in out
    assert api["worst_jobs"][0]["job_id"] in out
    assert f"{api['components'][0]['lost_gpu_h']:,.2f}" in out


def test_checkpoint_advice_json_is_the_api_answer(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _cli(capsys, "checkpoint-advice", "--json", "--db", db, "--since", str(START))
    assert code == 0
    cli_answer = json.loads(out)
    assert cli_answer == _api(db, "/api/v1/checkpoint-advice", since=str(START))
    assert cli_answer["models"]
    code, out, _ = _cli(capsys, "checkpoint-advice", "--db", db)
    assert code == 0
    for m in cli_answer["models"]:
        assert m["model"] in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--since", "1d", "--until", "2d"], "until must be after since"),
        (["--limit", "5000"], "limit must be between 0 and 1000"),
        (["--since", "last tuesday"], "cannot read time 'last tuesday'"),
    ],
)
def test_fleet_bad_input_is_one_line_and_exit_2(
    db: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    code, out, err = _cli(capsys, "fleet", "--db", db, *argv)
    assert code == 2 and out == ""
    assert message in err and "Traceback" not in err


def test_fleet_and_advice_on_a_missing_database_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "none" / "collector.db"
    for command in ("fleet", "checkpoint-advice"):
        code, out, err = _cli(capsys, command, "--db", str(missing))
        assert code == 1 and out == ""
        assert "does not exist" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "none").exists()
