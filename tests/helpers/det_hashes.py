"""SHA-256 of every trained or sampled artifact's smoke-sized run, for tests/integration/test_determinism.py.

Run as ``python tests/helpers/det_hashes.py [NAME ...]`` in a fresh process (the thread count comes from
``OMP_NUM_THREADS``); prints one JSON object ``{name: sha256}``. Sizes are cut so that all of them
take seconds, with batches large enough (512 rows for Part II) to reach torch's multi-threaded
kernels.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from mechbook.hashes import digest

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _aa_cfg():
    from mechbook.assign_add.config import TrainConfig

    return TrainConfig(steps=6, batch_size=512, eval_every=3, eval_per_pool=64, keep_every=3, resume_every=3)


def part2_train() -> str:
    from mechbook.assign_add.train import train

    r = train(_aa_cfg(), device="cpu")
    return digest([r.final_state, r.checkpoints, r.history[["accuracy", "loss"]].to_numpy()])


def part2_train_bf16() -> str:
    """The paper's model in the authors' precision (bf16 products, fp32 master weights); "no
    native bf16" where the CPU lacks it, in every process alike."""
    from mechbook.assign_add.config import native_bf16
    from mechbook.assign_add.train import train

    if not native_bf16("cpu"):
        return "no native bf16"
    r = train(dataclasses.replace(_aa_cfg(), precision="bf16"), device="cpu")
    return digest([r.final_state, r.checkpoints, r.history[["accuracy", "loss"]].to_numpy()])


def part2_train_smoke_profile() -> str:
    from mechbook.assign_add.config import with_overrides
    from mechbook.assign_add.runs import TRAIN_PROFILES
    from mechbook.assign_add.train import train

    r = train(
        with_overrides(TRAIN_PROFILES["smoke"], steps=20, eval_every=10, keep_every=10, resume_every=10), device="cpu"
    )
    return digest(r.final_state)


def _stacked(precision: str) -> str:
    from mechbook.assign_add.sweeps import point_config
    from mechbook.assign_add.train import train_stacked

    base = dataclasses.replace(_aa_cfg(), precision=precision)
    cfgs = [point_config(base, "f", 0.4), point_config(dataclasses.replace(base, seed=5), "f", 0.9)]
    return digest(
        [[r.final_state, r.history[["accuracy", "loss"]].to_numpy()] for r in train_stacked(cfgs, device="cpu")]
    )


def part2_stacked() -> str:
    return _stacked("fp32")


def part2_stacked_bf16() -> str:
    from mechbook.assign_add.config import native_bf16

    return _stacked("bf16") if native_bf16("cpu") else "no native bf16"


def _aa_model():
    from mechbook.assign_add.model import AssignAddModel

    return AssignAddModel().eval()


def part2_probes() -> str:
    from mechbook.assign_add.probes import ProbeConfig, probe_table
    from mechbook.assign_add.task import Task

    task = Task()
    x, y = task.sample(512, np.random.default_rng(0))
    model = _aa_model()
    table = probe_table(model, task.cfg, x, y, ProbeConfig(steps=20))
    _, acts = model.run_with_cache(torch.as_tensor(x))
    return digest([table[["accuracy", "chance", "n"]].to_numpy(dtype=np.float64), dict(acts.items())])


def part2_patching() -> str:
    from mechbook.assign_add.patching import one_var_patch_pairs, patched_logits
    from mechbook.assign_add.task import Task

    pairs = one_var_patch_pairs(Task(), 512, seed=0)
    logits = patched_logits(_aa_model(), pairs.clean, pairs.source, pairs.value_pos)
    return digest([dataclasses.asdict(pairs), logits])


def part2_eval_samples() -> str:
    from mechbook.assign_add.task import Task

    task = Task()
    return digest([task.eval_pools(256, 1), task.sample(512, np.random.default_rng(3))])


def part1_train() -> str:
    from mechbook.hashes import part1_random_tokens_run

    return part1_random_tokens_run()


def pythia_miniature() -> str:
    from mechbook.data import load_stories
    from mechbook.pythia.miniature import MiniatureConfig, train_miniature

    path = (
        os.environ.get("MECHBOOK_TINYSTORIES")
        or Path(__file__).resolve().parents[3] / "shared" / "data" / "tinystories" / "tinystories-sample.txt"
    )
    stories = load_stories(path=path, max_stories=200)
    cfg = MiniatureConfig(
        bpe_vocab=300,
        context=32,
        d_model=64,
        n_layers=2,
        n_heads=4,
        d_mlp=256,
        steps=4,
        batch_size=64,
        n_linear=2,
        seed=3,
    )
    run = train_miniature(stories, cfg)
    return digest([run.checkpoints, run.losses])


ARTIFACTS: dict[str, Callable[[], str]] = {
    f.__name__: f
    for f in (
        part2_train,
        part2_train_bf16,
        part2_train_smoke_profile,
        part2_stacked,
        part2_stacked_bf16,
        part2_probes,
        part2_patching,
        part2_eval_samples,
        part1_train,
        pythia_miniature,
    )
}


if __name__ == "__main__":
    os.environ.setdefault("MECHBOOK_QUIET", "1")
    names = sys.argv[1:] or list(ARTIFACTS)
    print(json.dumps({"threads": torch.get_num_threads(), **{n: ARTIFACTS[n]() for n in names}}))
