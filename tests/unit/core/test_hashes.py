"""mechbook.hashes' bisection of a disagreement between two CPUs: the op trace records what each
operation read and wrote, and ``first_difference`` names the first operation that parts and why;
the committed hashes are kept per CPU model."""

from __future__ import annotations

import json

import torch

from mechbook import hashes


def _step(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(x @ w, dim=-1).sum()


def _trace(x: torch.Tensor, w: torch.Tensor) -> list[dict]:
    return hashes._traced(lambda: _step(x, w))


X = torch.randn(8, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
W = torch.randn(5, 3, generator=torch.Generator().manual_seed(1), dtype=torch.float64)


def test_a_trace_records_each_op_with_its_inputs_and_outputs():
    rows = _trace(X, W)
    assert [r["op"] for r in rows] == ["aten.mm.default", "aten._log_softmax.default", "aten.sum.default"]
    assert rows[1]["in"] == rows[0]["out"] and rows[2]["in"] == rows[1]["out"]  # each reads the last one's output
    assert rows == _trace(X.clone(), W.clone())  # digests of values, not of storage


def test_first_difference_names_an_op_that_rounds_otherwise_on_the_same_inputs():
    mine, theirs = _trace(X, W), _trace(X, W)
    theirs[1] = {**theirs[1], "out": ["0123456789abcdef"]}
    assert hashes.first_difference(mine, theirs).startswith("op 1, aten._log_softmax.default: other bits from the same")


def test_first_difference_names_inputs_that_came_from_outside_torch():
    other = X.clone()
    other[0, 0] = torch.nextafter(other[0, 0], torch.tensor(10.0, dtype=torch.float64))  # one ulp: numpy's rounding
    said = hashes.first_difference(_trace(X, W), _trace(other, W))
    assert said.startswith("op 0, aten.mm.default: its inputs [0] already differ, from outside torch")


def test_first_difference_names_another_code_path_and_full_agreement():
    mine = _trace(X, W)
    assert hashes.first_difference(mine, mine) == "all 3 ops give the same bits"
    theirs = [mine[0], {**mine[1], "op": "aten.softmax.default"}, mine[2]]
    assert "the code paths part" in hashes.first_difference(mine, theirs)
    assert "one trace is longer" in hashes.first_difference(mine, mine[:2])


def test_digests_hash_bf16_and_strided_tensors_by_value():
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    assert hashes._tensor_digest(t.T) == hashes._tensor_digest(t.T.contiguous())
    assert hashes._tensor_digest(t.expand(2, 2, 3)[0]) == hashes._tensor_digest(t)
    b = t.to(torch.bfloat16)
    assert hashes._tensor_digest(b) != hashes._tensor_digest((t + 1).to(torch.bfloat16))


def test_committed_hashes_are_kept_per_cpu_model_with_their_paths():
    book = hashes.committed()
    assert book, "mechbook/book/weight_hashes.json holds at least one CPU model"
    for model, entry in book.items():
        assert entry["model"] == model and set(entry["hashes"]) == set(hashes.RUNS)
        assert entry["kernels"].startswith("aten ") and "openblas" in entry["kernels"]
    here = {"torch": "x", "kernels": "y", "code": "c"}
    assert hashes.comparable(here, here) and not hashes.comparable({**here, "kernels": "z"}, here)
    assert not hashes.comparable({**here, "code": "other"}, here), "another training code's bits are stale"
    assert not hashes.comparable({"torch": "x", "kernels": "y"}, here), "an entry from before the digests is stale"
    for path in hashes.TRACES.glob("*.json"):
        trace = json.loads(path.read_text())
        assert set(trace["runs"]) == set(hashes.TRACED) and trace["model"] in book
