"""``ett train`` options: presets, overrides, validation, fault options."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.config import SIZES, ModelConfig, TrainConfig, build_parser, parse_args
from trainer.faults import FaultSpec


def test_defaults_are_a_small_cpu_job() -> None:
    cfg = parse_args([])
    assert cfg.model == ModelConfig()
    assert (cfg.steps, cfg.batch_size, cfg.ckpt_mode, cfg.device) == (200, 256, "sync", "auto")
    assert cfg.compile and cfg.resume and cfg.final_ckpt and cfg.fault is None
    assert cfg.run_dir is None


def test_size_preset_and_overrides() -> None:
    cfg = parse_args(["--size", "small", "--rows", "123", "--emb-dim", "32"])
    small = SIZES["small"]
    assert cfg.model.num_tables == small["num_tables"]
    assert cfg.model.rows == 123
    assert cfg.model.emb_dim == 32
    assert cfg.model.dense_arch == (*small["dense_arch"][:-1], 32)  # last layer follows emb-dim


@pytest.mark.parametrize("size", sorted(SIZES))
def test_every_preset_is_a_valid_model(size: str) -> None:
    assert parse_args(["--size", size]).model.dense_arch[-1] == SIZES[size]["emb_dim"]


@pytest.mark.parametrize(
    "argv",
    [
        ["--dense-arch", "16,4", "--emb-dim", "8"],  # last dense layer must equal emb-dim
        ["--over-arch", "16,2"],  # one logit
        ["--dense-arch", "a,b"],
        ["--steps", "0"],
        ["--ckpt-every-s", "-1"],
        ["--ckpt-mode", "lazy"],
        ["--fail-at-step", "3", "--fail-kind", "hang", "--watchdog-s", "0"],
        ["--fail-at-step", "3", "--fail-kind", "segfault"],
        # from a probe: each was a traceback per rank and attempt, or a crash after start-up
        ["--fail-at-step", "-5"],
        ["--fail-at-step", "3", "--fail-rank", "-3"],
        ["--fail-at-step", "3", "--fail-attempt", "-2"],
        ["--eval-every", "5", "--eval-batches", "0"],
        ["--step-delay-s", "-1"],
        ["--lr", "-5"],
        ["--lr", "nan"],
        ["--window-s", "0"],
        ["--ckpt-keep", "-1"],
        # a fault that could never fire ran to exit 0 with no word
        ["--steps", "10", "--fail-at-step", "500"],
        ["--fail-at-step", "3", "--fail-rank", "5"],
        ["--fail-rank", "1"],
    ],
)
def test_bad_options_exit_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert "usage: ett train" in capsys.readouterr().err


def test_fault_options_make_a_fault_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")  # as torchrun sets it for each rank
    cfg = parse_args(
        [
            "--fail-at-step",
            "7",
            "--fail-kind",
            "sigkill",
            "--fail-rank",
            "1",
            "--fail-attempt",
            "-1",
        ]
    )
    assert cfg.fault == FaultSpec(kind="sigkill", step=7, rank=1, attempt=-1)


def test_paths_follow_the_run_dir_and_job_id(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ETT_JOB_ID", raising=False)
    cfg = parse_args(["--run-dir", "/tmp/x"])
    assert cfg.checkpoint_dir == Path("/tmp/x/checkpoints")
    assert cfg.steplog_dir == Path("/tmp/x/steplog")
    cfg = parse_args(["--ckpt-dir", "/ckpt"]).with_job_id("job-7")
    assert (cfg.job_id, cfg.run_dir, cfg.checkpoint_dir) == (
        "job-7",
        Path("runs/job-7"),
        Path("/ckpt"),
    )


def test_job_id_from_flag_then_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ETT_JOB_ID", "from-env")
    assert parse_args([]).job_id == "from-env"
    assert parse_args(["--job-id", "flag"]).job_id == "flag"
    assert parse_args(["--job-id", "flag"]).with_job_id("other").job_id == "flag"


def test_model_config_round_trips_through_json() -> None:
    mc = ModelConfig(num_tables=3, rows=50, emb_dim=4, dense_arch=(8, 4), over_arch=(6, 1))
    assert ModelConfig.from_json(mc.to_json()) == mc
    assert mc.feature_names == ["f0", "f1", "f2"]


def test_help_documents_every_option_group() -> None:
    text = build_parser().format_help()
    for flag in ("--ckpt-mode", "--compile-cache", "--fail-kind", "--watchdog-s", "--device"):
        assert flag in text
    assert isinstance(parse_args(["--no-compile"]), TrainConfig)


def test_help_states_what_each_default_is() -> None:
    """The preset-backed model flags showed no default, --over-arch's printed as a Python
    tuple, and the description launched `-m trainer.train` where the command is `ett train`."""
    import re

    raw = build_parser().format_help()
    text = " ".join(raw.split())
    assert "`ett train` runs one process" in text and "--no-python ett train" in text
    entries = re.split(r"\n  (?=-)", raw)  # one entry per option of the options list
    for flag in ("--num-tables", "--rows", "--emb-dim", "--dense-arch"):
        entry = " ".join(next(e for e in entries if e.startswith(f"{flag} ")).split())
        assert "(default: from --size: tiny" in entry, entry
    assert "comma-separated (e.g. 64,16)" in text and "(default: 32,1)" in text
    assert "(32, 1)" not in text
    assert "when this step starts (default: none)" in text
    assert "(0: none by time)" in text and "(0: none by steps)" in text
    assert parse_args([]).model.over_arch == (32, 1)  # the default as text, read as --over-arch


@pytest.mark.parametrize("atol", ["-1", "nan"])
def test_publish_refuses_a_bound_no_difference_meets(
    atol: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--atol -1 printed 'MISMATCH (max |diff| export 0.00e+00 ...)' and exited 1."""
    from trainer.publish import main

    with pytest.raises(SystemExit) as exc:
        main(["--checkpoint", str(tmp_path), "--out", str(tmp_path / "out"), "--atol", atol])
    assert exc.value.code == 2
    assert "--atol must be a number >= 0" in capsys.readouterr().err
