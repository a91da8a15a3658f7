"""`torchedge bench` (its --json report) and `--threads` on run, check and bench."""

import json

import pytest

from torchedge.cli.main import main


@pytest.fixture(scope="module")
def mlp_pte(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("bench") / "mlp.pte"
    assert main(["export", "mlp", "-o", str(path)]) == 0
    return str(path)


def bench_json(capsys, *args) -> dict:
    capsys.readouterr()
    assert main(["bench", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def assert_latency(latency: dict) -> None:
    assert set(latency) == {"p50", "p90", "min"}
    assert all(isinstance(v, float) and v >= 0 for v in latency.values())
    assert latency["min"] <= latency["p50"] <= latency["p90"]


def test_bench_json_report(mlp_pte, capsys):
    report = bench_json(capsys, mlp_pte, "--warmup", "1", "--repeat", "5")
    assert report["pte"] == mlp_pte and report["method"] == "forward" and report["model"] is None
    assert (report["threads"], report["warmup"], report["repeat"]) == (1, 1, 5)
    assert report["inputs"] == ["float32[4, 32]"]
    assert set(report["latency_ms"]) == {"torchedge"}
    assert_latency(report["latency_ms"]["torchedge"])
    memory = report["memory_bytes"]
    assert memory["planned"] > 0 and memory["runtime"] == 0
    assert memory["peak"] == memory["planned"] + memory["runtime"]


def test_bench_with_eager_beside_at_the_same_threads(mlp_pte, capsys):
    import torch

    threads_before = torch.get_num_threads()
    report = bench_json(capsys, mlp_pte, "--repeat", "3", "--model", "mlp", "--threads", "2")
    assert report["model"] == "mlp" and report["threads"] == 2
    assert set(report["latency_ms"]) == {"torchedge", "eager"}
    for latency in report["latency_ms"].values():
        assert_latency(latency)
    assert torch.get_num_threads() == threads_before  # restored after the run


def test_bench_text_report(mlp_pte, capsys):
    assert main(["bench", mlp_pte, "--repeat", "3", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 threads" in out and "torchedge  p50" in out and "planned arenas" in out


def test_bench_with_a_model_that_does_not_fit_the_pte(mlp_pte, capsys):
    assert main(["bench", mlp_pte, "--repeat", "1", "--model", "cnn"]) == 2
    assert "model 'cnn' does not run on the .pte's inputs (float32[4, 32])" in capsys.readouterr().err


def test_run_and_check_take_threads(mlp_pte, capsys):
    assert main(["run", mlp_pte, "--repeat", "2", "--threads", "2"]) == 0
    assert "2 threads" in capsys.readouterr().out
    assert main(["check", "mlp", "--repeat", "2", "--threads", "2"]) == 0
    out = capsys.readouterr().out
    assert "2 threads each" in out and out.rstrip().endswith("PASS")


@pytest.mark.parametrize("command", ["run", "bench", "check"])
@pytest.mark.parametrize("threads", ["0", "-2", "two"])
def test_bad_threads_is_a_usage_error(mlp_pte, capsys, command, threads):
    target = "mlp" if command == "check" else mlp_pte
    with pytest.raises(SystemExit) as exit_info:
        main([command, target, "--threads", threads])
    assert exit_info.value.code == 2
    assert f"--threads: expected a whole number >= 1, got '{threads}'" in capsys.readouterr().err
