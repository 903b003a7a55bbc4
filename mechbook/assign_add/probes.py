"""Linear probes: what can be read linearly from the residual stream (chapter 9).

A probe is a multinomial logistic regression ``softmax(W x + b)`` trained full-batch with AdamW
on standardised features, scored on a held-out split. Chance is the held-out frequency of the
most common class, so a probe that learned nothing scores near it. The variable-identity probe
can also be tracked over a run's checkpoints (:func:`variable_identity_over_training`, chapter 8).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add.task import TaskConfig
from mechbook.cache import cached, fingerprint
from mechbook.determinism import deterministic
from mechbook.progress import progress
from mechbook.validation import POSITIVE, SEED, above, at_least, between, check_fields


@dataclass(frozen=True)
class ProbeConfig:
    """How a probe is trained: full-batch AdamW steps, learning rate, weight decay, the
    held-out fraction and the seed of the split and initialisation."""

    steps: int = 300
    lr: float = 0.05
    weight_decay: float = 1e-3
    test_fraction: float = 0.3
    seed: int = 0

    def __post_init__(self) -> None:
        check_fields(
            self,
            steps=POSITIVE,
            lr=above(0),
            weight_decay=at_least(0),
            test_fraction=between(0.0, 1.0, low_open=True, high_open=True),
            seed=SEED,
        )


@dataclass(frozen=True)
class ProbeResult:
    """Train and held-out accuracy of one probe, the chance level, and the sizes involved."""

    train_accuracy: float
    test_accuracy: float
    chance: float
    n_train: int
    n_test: int
    n_classes: int


@deterministic()
def fit_probe(features: torch.Tensor, labels: torch.Tensor, cfg: ProbeConfig = ProbeConfig()) -> ProbeResult:
    """Train a linear probe from ``features`` (n, d) to integer ``labels`` (n,) and score it on a
    seeded held-out split of ``cfg.test_fraction`` of the rows; a loss that stops being finite
    stops the fit with one line (a ``FloatingPointError``), so nothing built on it is cached."""
    features = torch.as_tensor(features, dtype=torch.float32).detach()
    labels = torch.as_tensor(labels, dtype=torch.long).detach()
    if features.ndim != 2 or labels.ndim != 1 or len(features) != len(labels):
        raise ValueError(f"need features (n, d) and labels (n,), got {tuple(features.shape)} and {tuple(labels.shape)}")
    if not 0 < cfg.test_fraction < 1:
        raise ValueError(f"test_fraction must be in (0, 1), got {cfg.test_fraction}")
    n = len(labels)
    n_test = int(round(n * cfg.test_fraction))
    if n_test < 1 or n - n_test < 2:
        raise ValueError(f"{n} examples are too few for a train/test split; give the probe more sequences")
    gen = torch.Generator().manual_seed(cfg.seed)
    order = torch.randperm(n, generator=gen)
    test_idx, train_idx = order[:n_test], order[n_test:]
    mean = features[train_idx].mean(0)
    std = features[train_idx].std(0).clamp_min(1e-6)
    x = (features - mean) / std
    n_classes = int(labels.max()) + 1
    probe = torch.nn.Linear(x.shape[1], n_classes)
    with torch.no_grad():
        probe.weight.copy_(torch.randn(probe.weight.shape, generator=gen) * 0.01)
        probe.bias.zero_()
    opt = torch.optim.AdamW(probe.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    with torch.enable_grad():
        for step in range(cfg.steps):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(probe(x[train_idx]), labels[train_idx])
            if not torch.isfinite(loss):
                raise FloatingPointError(
                    f"the probe diverged: its loss is {loss.item()} at step {step} with lr {cfg.lr:g}; lower the "
                    "learning rate (nothing was cached)"
                )
            loss.backward()
            opt.step()
    with torch.no_grad():
        pred = probe(x).argmax(-1)
    correct = (pred == labels).float()
    chance = torch.bincount(labels[test_idx], minlength=n_classes).max().item() / n_test
    return ProbeResult(
        train_accuracy=correct[train_idx].mean().item(),
        test_accuracy=correct[test_idx].mean().item(),
        chance=chance,
        n_train=len(train_idx),
        n_test=n_test,
        n_classes=n_classes,
    )


PROBE_HOOKS: dict[str, str] = {
    "embedding": "blocks.0.hook_resid_pre",
    "after layer 1": "blocks.0.hook_resid_post",
    "after layer-2 attention": "blocks.1.hook_resid_mid",
    "after layer 2": "blocks.1.hook_resid_post",
}
"""Where probes read the residual stream, in model order."""


def variable_identity_sites(tokens: np.ndarray, task_cfg: TaskConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Value positions in the context (a number right after a variable) and the preceding
    variable's index: ``(rows, positions, labels)``."""
    ctx = tokens[:, : task_cfg.context_len]
    is_num = ctx < task_cfg.modulus
    after_var = np.zeros_like(is_num)
    after_var[:, 1:] = (ctx[:, :-1] >= task_cfg.var0) & (ctx[:, :-1] < task_cfg.d_vocab)
    rows, pos = np.nonzero(is_num & after_var)
    return rows, pos, tokens[rows, pos - 1] - task_cfg.var0


def operand_value_sites(tokens: np.ndarray, task_cfg: TaskConfig) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Query operand positions (13, 14) holding a variable, and the value that variable is
    assigned in the context: ``(rows, positions, labels)``."""
    c = task_cfg.context_len
    rows, pos = [], []
    for slot in (c + 1, c + 2):
        r = np.nonzero(tokens[:, slot] >= task_cfg.var0)[0]
        rows.append(r)
        pos.append(np.full(len(r), slot))
    rows, pos = np.concatenate(rows), np.concatenate(pos)
    ctx = tokens[rows, :c]
    var_at = np.argmax(ctx == tokens[rows, pos][:, None], axis=1)
    return rows, pos, tokens[rows, var_at + 1]


def answer_sites(tokens: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The '=' position of every sequence and its answer: ``(rows, positions, labels)``."""
    rows = np.arange(len(tokens))
    return rows, np.full(len(tokens), tokens.shape[1] - 1), np.asarray(labels)


@deterministic()
def probe_table(
    model: torch.nn.Module,
    task_cfg: TaskConfig,
    tokens: np.ndarray,
    labels: np.ndarray,
    cfg: ProbeConfig = ProbeConfig(),
) -> pd.DataFrame:
    """Held-out accuracy of a linear probe for three targets at every point of
    :data:`PROBE_HOOKS`: the variable before a value position (``variable identity``), the
    value assigned to a query operand variable (``operand's value``) and the sum at '='
    (``answer``). Columns ``target``, ``site``, ``where``, ``accuracy``, ``chance``, ``n``."""
    with torch.no_grad():
        _, cache = model.run_with_cache(torch.as_tensor(tokens), names_filter=lambda n: n in PROBE_HOOKS.values())
    targets = {
        "variable identity": ("value positions", variable_identity_sites(tokens, task_cfg)),
        "operand's value": ("operand variable positions", operand_value_sites(tokens, task_cfg)),
        "answer": ("'='", answer_sites(tokens, labels)),
    }
    out = []
    for target, (site, (rows, pos, y)) in targets.items():
        for where, hook in PROBE_HOOKS.items():
            res = fit_probe(cache[hook][torch.as_tensor(rows), torch.as_tensor(pos)], torch.as_tensor(y), cfg)
            out.append(
                {
                    "target": target,
                    "site": site,
                    "where": where,
                    "accuracy": res.test_accuracy,
                    "chance": res.chance,
                    "n": len(y),
                }
            )
    return pd.DataFrame(out)


def cached_probe_table(
    model: torch.nn.Module,
    task_cfg: TaskConfig,
    tokens: np.ndarray,
    labels: np.ndarray,
    cfg: ProbeConfig = ProbeConfig(),
) -> pd.DataFrame:
    """:func:`probe_table`, cached on the model's weights, the sequences and the probe config
    (probes train 12 small classifiers: seconds to a minute)."""
    key = {
        "weights": fingerprint(model.state_dict()),
        "task": task_cfg,
        "tokens": np.asarray(tokens),
        "labels": np.asarray(labels),
        "probe": cfg,
    }
    return cached("assign_add/probes", key, lambda: probe_table(model, task_cfg, tokens, labels, cfg))


def variable_identity_over_training(
    load: Callable[[int], torch.nn.Module],
    steps: Sequence[int],
    task_cfg: TaskConfig,
    tokens: np.ndarray,
    where: Sequence[str] = ("embedding", "after layer 1"),
    cfg: ProbeConfig = ProbeConfig(),
) -> pd.DataFrame:
    """The variable-identity probe (the variable before each value position) at every step of a
    run, ``load(step)`` giving the model there (a rebuild's ``load_model`` or the release):
    columns ``step``, ``where`` (keys of :data:`PROBE_HOOKS`), ``accuracy``, ``chance``, ``n``."""
    unknown = sorted(set(where) - set(PROBE_HOOKS))
    if unknown:
        raise ValueError(f"unknown probe sites {unknown}; the sites are {list(PROBE_HOOKS)}")
    rows_, pos, y = variable_identity_sites(tokens, task_cfg)
    hooks = {PROBE_HOOKS[w] for w in where}
    out = []
    for step in progress(list(steps), desc="variable-identity probe"):
        with torch.no_grad():
            _, cache = load(step).run_with_cache(torch.as_tensor(tokens), names_filter=lambda n: n in hooks)
        for w in where:
            res = fit_probe(
                cache[PROBE_HOOKS[w]][torch.as_tensor(rows_), torch.as_tensor(pos)], torch.as_tensor(y), cfg
            )
            out.append({"step": step, "where": w, "accuracy": res.test_accuracy, "chance": res.chance, "n": len(y)})
    return pd.DataFrame(out)


def release_probe_history(
    steps: Sequence[int] | None = None,
    n_sequences: int = 512,
    seed: int = 0,
    folder=None,
    cfg: ProbeConfig = ProbeConfig(),
) -> pd.DataFrame:
    """:func:`variable_identity_over_training` on the released run at ``steps`` (default: every
    local checkpoint), on ``n_sequences`` training-distribution sequences drawn with ``seed``;
    cached on the pinned commit, the steps, the sizes, the probe config and the code."""
    from mechbook.assign_add import release
    from mechbook.assign_add.task import Task

    steps = sorted(release.available_steps(folder) if steps is None else steps)
    if not steps:
        raise ValueError(f"no released checkpoint is available locally; set {release.ENV_VAR} or pass folder=...")

    def compute() -> pd.DataFrame:
        task = Task(TaskConfig())
        tokens, _ = task.sample(n_sequences, np.random.default_rng([seed, 19]))
        return variable_identity_over_training(
            lambda s: release.load_release(s, folder), steps, task.cfg, tokens, cfg=cfg
        )

    key = {"commit": release.RELEASE_COMMIT, "steps": steps, "n": n_sequences, "seed": seed, "probe": cfg}
    return cached("assign_add/release_probes", key, compute)


PROBE_POOLS = ("0var_train", "1var_train", "2var_train")
"""The evaluation pools whose sequences train and score chapter 9's probes."""


def pooled_probe_table(
    model: torch.nn.Module, task_cfg: TaskConfig, pools: dict[str, tuple[np.ndarray, np.ndarray]], cfg: ProbeConfig
) -> pd.DataFrame:
    """:func:`cached_probe_table` on the sequences of the :data:`PROBE_POOLS` of ``pools``
    (:meth:`Task.eval_pools`), chapter 9."""
    return cached_probe_table(
        model,
        task_cfg,
        np.concatenate([pools[p][0] for p in PROBE_POOLS]),
        np.concatenate([pools[p][1] for p in PROBE_POOLS]),
        cfg,
    )


def probe_accuracy(probes: pd.DataFrame, target: str, where: str) -> float:
    """Held-out accuracy of the probe for ``target`` at ``where`` in a :func:`probe_table`."""
    hit = probes[(probes["target"] == target) & (probes["where"] == where)]
    if hit.empty:
        raise KeyError(f"no probe for {target!r} at {where!r}; targets {sorted(probes['target'].unique())}")
    return float(hit["accuracy"].iloc[0])
