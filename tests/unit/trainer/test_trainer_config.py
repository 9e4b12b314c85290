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
    ],
)
def test_bad_options_exit_with_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        parse_args(argv)
    assert exc.value.code == 2
    assert "usage: ett train" in capsys.readouterr().err


def test_fault_options_make_a_fault_spec() -> None:
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
