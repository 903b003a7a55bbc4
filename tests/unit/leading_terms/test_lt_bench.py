"""``python -m mechbook bench attention-model``: its JSON line, FLOP counts and agreement check."""

import json

from mechbook.benchmarks.attention_model import _parser, main
from mechbook.leading_terms.model import ModelConfig
from mechbook.leading_terms.plan import step_flops


def test_quick_bench_reports_counted_flops_and_rates(capsys):
    assert main(["--quick", "--steps", "1", "--target", "0.01"]) == 0
    lines = capsys.readouterr().out.splitlines()
    report = json.loads(lines[-1])
    assert report["agree"] and report["ok"]
    assert (report["vocab_size"], report["context"], report["batch"]) == (64, 16, 32)
    # the dense step does at most the plan's count (no gradient flows into the one-hot input), the
    # fast step fewer: its first two layers gather instead of multiplying
    assert 0 < report["fast_flops_per_step"] < report["dense_flops_per_step"] <= step_flops(ModelConfig(64, 16, 3), 32)
    for name in ("fast", "dense"):
        rate = report[f"{name}_flops_per_step"] / report[f"{name}_s_per_step"] / 1e9
        assert report[f"{name}_gflops_per_s"] == rate
    assert "GFLOP/s" in lines[1] and "GFLOP/s" in lines[2]


def test_bench_defaults_to_the_cpu_profiles_size():
    args = _parser().parse_args([])
    assert (args.vocab, args.context, args.batch, args.layers) == (512, 64, 64, 3)
