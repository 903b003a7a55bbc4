"""Ablating the leading terms and the logit paths of a trained model (chapter 5).

For a trained matrix M and its leading-term direction T (W_O: B, V: (B Phi)^T, W: Q, P: P-term),
the ablated matrix keeps only what the leading term does not explain:

    M' = M - (<M, T> / ||T||^2) T,        <M, T> = tr(M^T T)

so <M', T> = 0. Replacing one matrix at a time and measuring the loss shows how much of the
model's skill rides on each leading term. Ablating W_O removes the readout of every path at once, so
the module also drops single logit paths (:func:`path_ablation`), splits W_O into its B part and
remainder read alone (:func:`output_split`), zeroes every key-query matrix (:func:`zeroed_loss`) and
compares single removals with the joint one (:func:`additivity`); :func:`cached_cooperation` runs
them all for one trained run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from mechbook.cache import cached, fingerprint
from mechbook.leading_terms import leading
from mechbook.leading_terms.model import AttentionModel, parameter_names


def remove_projection(weight: torch.Tensor, term: np.ndarray | torch.Tensor) -> torch.Tensor:
    """M - (<M, T> / ||T||^2) T, computed in float64 and returned in M's dtype and device."""
    m = weight.detach().double()
    t = torch.as_tensor(term, dtype=torch.float64, device=m.device)
    if t.shape != m.shape:
        raise ValueError(
            f"leading term has shape {tuple(t.shape)}, the matrix {tuple(m.shape)}; use the stats of the training corpus"
        )
    norm2 = (t * t).sum()
    if norm2 == 0:
        raise ValueError("the leading term is zero, so there is no direction to remove")
    return (m - (m * t).sum() / norm2 * t).to(weight.dtype)


@torch.no_grad()
def evaluate_loss(model: AttentionModel, tokens: np.ndarray, batch_size: int = 256) -> float:
    """Mean cross-entropy over every (sequence, position) of ``tokens`` (N, T+1), in batches."""
    seqs = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    total = 0.0
    for start in range(0, len(seqs), batch_size):
        batch = seqs[start : start + batch_size].to(model.W_O.device)
        total += model.loss(batch).item() * len(batch)
    return total / len(seqs)


@torch.no_grad()
def ablation_table(
    state: dict[str, torch.Tensor], model: AttentionModel, stats: Any, tokens: np.ndarray, batch_size: int = 256
) -> pd.DataFrame:
    """Loss with each matrix's leading component removed, one at a time, next to the full model,
    the model with every leading component removed at once, and the all-zero model (loss log |V|).

    Columns: ablation, matrix, kind, layer, cosine (of the matrix with its term), loss, delta_loss
    (loss minus the full model's). ``model`` is loaded with ``state`` and restored afterwards.
    """
    bases = leading.bases(stats)
    model.load_checkpoint(state)
    full = evaluate_loss(model, tokens, batch_size)
    rows = [{"ablation": "full model", "matrix": None, "kind": None, "layer": None, "cosine": None, "loss": full}]
    names = parameter_names(model.cfg)
    for name in names:
        kind, layer = leading.kind_of(name)
        param = model.get_parameter(name)
        param.copy_(remove_projection(param, bases[kind]))
        rows.append(
            {
                "ablation": f"remove leading term of {name}",
                "matrix": name,
                "kind": kind,
                "layer": layer,
                "cosine": leading.cosine(state[name].numpy(), bases[kind]),
                "loss": evaluate_loss(model, tokens, batch_size),
            }
        )
        param.copy_(state[name])
    for name in names:
        param = model.get_parameter(name)
        param.copy_(remove_projection(param, bases[leading.kind_of(name)[0]]))
    rows.append(
        {
            "ablation": "remove every leading term",
            "matrix": None,
            "kind": None,
            "layer": None,
            "cosine": None,
            "loss": evaluate_loss(model, tokens, batch_size),
        }
    )
    for param in model.parameters():
        param.zero_()
    rows.append(
        {
            "ablation": "zero model",
            "matrix": None,
            "kind": None,
            "layer": None,
            "cosine": None,
            "loss": evaluate_loss(model, tokens, batch_size),
        }
    )
    model.load_checkpoint(state)
    table = pd.DataFrame(rows)
    table["delta_loss"] = table["loss"] - full
    return table


def _ce_sum(logits: torch.Tensor, targets: torch.Tensor) -> float:
    return float(
        torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="sum")
    )


def path_labels(n_layers: int) -> list[str]:
    """The logit paths in the order of :func:`path_logits`: the residual path, then each layer's
    attention path (the labels of :mod:`mechbook.leading_terms.logit_paths`)."""
    from mechbook.leading_terms.logit_paths import RESIDUAL, path_name

    return [RESIDUAL] + [path_name(l) for l in range(n_layers)]


@torch.no_grad()
def path_logits(model: AttentionModel, inputs: torch.Tensor) -> torch.Tensor:
    """(1 + L, batch, T, |V|): the logits each path writes, residual first, then attention layer
    0..L-1 (their sum is the model's logits; chapter 5)."""
    names = ["hook_embed"] + [f"blocks.{l}.hook_attn_out" for l in range(model.cfg.n_layers)]
    _, cache = model.run_with_cache(inputs, names_filter=names)
    return torch.stack([cache[n] @ model.W_O for n in names])


def path_removals(n_layers: int) -> dict[str, tuple[int, ...]]:
    """{removal: indices of the paths it drops}: none, the residual path, each attention layer's
    path, every attention path (chapter 5's path ablation)."""
    out: dict[str, tuple[int, ...]] = {"full model": (), "without the residual path": (0,)}
    out.update({f"without attention layer {l}": (l + 1,) for l in range(n_layers)})
    out["without every attention path"] = tuple(range(1, n_layers + 1))
    return out


@torch.no_grad()
def path_ablation(model: AttentionModel, tokens: np.ndarray, batch_size: int = 128) -> pd.DataFrame:
    """Loss with logit paths dropped from the final sum (the direct effect of each path: the
    attention patterns and every layer's input stay those of the full model), one row per
    :func:`path_removals` entry; columns ``removal``, ``paths`` (labels dropped), ``loss``,
    ``delta_loss`` (minus the full model's). Chapter 5."""
    removals = path_removals(model.cfg.n_layers)
    labels = path_labels(model.cfg.n_layers)
    seqs = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    totals = dict.fromkeys(removals, 0.0)
    count = 0
    for start in range(0, len(seqs), batch_size):
        batch = seqs[start : start + batch_size].to(model.W_O.device)
        parts = path_logits(model, batch[:, :-1])
        targets = batch[:, 1:]
        whole = parts.sum(0)
        for name, dropped in removals.items():
            logits = whole - parts[list(dropped)].sum(0) if dropped else whole
            totals[name] += _ce_sum(logits, targets)
        count += targets.numel()
    rows = [
        {"removal": name, "paths": ", ".join(labels[i] for i in dropped), "loss": totals[name] / count}
        for name, dropped in removals.items()
    ]
    table = pd.DataFrame(rows)
    table["delta_loss"] = table["loss"] - table["loss"].iloc[0]
    return table


@dataclass(frozen=True)
class OutputSplit:
    r"""W_O split into its B part :math:`\alpha B` (:math:`\alpha = \langle W_O, B\rangle/\|B\|^2`) and
    the remainder R = W_O − αB, each read alone on the model's final residual stream (chapter 5:
    why removing the B part can cost more than zeroing the model).

    ``loss_*``: mean cross-entropy with W_O replaced by both parts (the full model), by αB alone, by R
    alone, and the zero model (log |V|). ``logit_cosine``: cosine between the centred logits the two
    parts write, over every position (negative: R cancels part of what αB writes). ``right_*``: the
    mean centred logit of the right next token from each part. ``rms_*``: the root mean square of
    the centred logits (how loud each part is). ``top_b_part``: the mean of the B part's largest
    centred logit at each position, and ``hit_b_part`` the share of positions where that largest
    logit is the right token's (a loud part that puts another token far above the right one costs
    more than the zero model, whatever it gives the right token)."""

    loss_full: float
    loss_b_part: float
    loss_remainder: float
    loss_zero: float
    logit_cosine: float
    right_b_part: float
    right_remainder: float
    rms_full: float
    rms_b_part: float
    rms_remainder: float
    top_b_part: float
    hit_b_part: float


@torch.no_grad()
def output_split(model: AttentionModel, term: np.ndarray, tokens: np.ndarray, batch_size: int = 128) -> OutputSplit:
    """:class:`OutputSplit` of ``model``'s W_O against ``term`` (B) on ``tokens`` (N, T+1)."""
    W_O = model.W_O.detach()
    remainder = remove_projection(W_O, term)
    parts = {"full": W_O, "b_part": W_O - remainder, "remainder": remainder}
    last = f"blocks.{model.cfg.n_layers - 1}.hook_resid_post"
    seqs = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    ce = dict.fromkeys(parts, 0.0)
    right = dict.fromkeys(parts, 0.0)
    square = dict.fromkeys(parts, 0.0)
    dot = top = hit = 0.0
    count = 0
    for start in range(0, len(seqs), batch_size):
        batch = seqs[start : start + batch_size].to(W_O.device)
        _, cache = model.run_with_cache(batch[:, :-1], names_filter=[last])
        resid, targets = cache[last].double(), batch[:, 1:]
        centred = {}
        for name, matrix in parts.items():
            logits = resid @ matrix.double()
            ce[name] += _ce_sum(logits, targets)
            c = logits - logits.mean(-1, keepdim=True)
            centred[name] = c
            right[name] += float(c.gather(-1, targets[..., None]).sum())
            square[name] += float((c * c).sum())
        dot += float((centred["b_part"] * centred["remainder"]).sum())
        best, guess = centred["b_part"].max(-1)
        top += float(best.sum())
        hit += float((guess == targets).sum())
        count += targets.numel()
    v = model.cfg.d_vocab
    denom = (square["b_part"] * square["remainder"]) ** 0.5
    return OutputSplit(
        loss_full=ce["full"] / count,
        loss_b_part=ce["b_part"] / count,
        loss_remainder=ce["remainder"] / count,
        loss_zero=float(np.log(v)),
        logit_cosine=dot / denom if denom > 0 else 0.0,
        right_b_part=right["b_part"] / count,
        right_remainder=right["remainder"] / count,
        rms_full=(square["full"] / (count * v)) ** 0.5,
        rms_b_part=(square["b_part"] / (count * v)) ** 0.5,
        rms_remainder=(square["remainder"] / (count * v)) ** 0.5,
        top_b_part=top / count,
        hit_b_part=hit / count,
    )


@torch.no_grad()
def zeroed_loss(
    model: AttentionModel, state: dict[str, torch.Tensor], names: list[str], tokens: np.ndarray, batch_size: int = 256
) -> float:
    """Loss with the parameters ``names`` set to 0 (the rest from ``state``); ``model`` is restored
    to ``state`` afterwards. Chapter 5's "W := 0" control: with every key-query matrix zeroed,
    attention is set by the position biases alone."""
    model.load_checkpoint(state)
    for name in names:
        model.get_parameter(name).zero_()
    loss = evaluate_loss(model, tokens, batch_size)
    model.load_checkpoint(state)
    return loss


def additivity(deltas: list[float] | np.ndarray, joint: float) -> tuple[float, float]:
    """(sum of the single removals' loss increases, the joint removal's increase): equal when the
    removals' effects add (chapter 5)."""
    return float(np.sum(deltas)), float(joint)


@dataclass(frozen=True)
class Cooperation:
    """Chapter 5's experiments on one trained run: the matrix ablation table
    (:func:`ablation_table`), the path ablation (:func:`path_ablation`), the W_O split
    (:func:`output_split`), and the "W := 0" control loss (every key-query matrix zeroed)."""

    matrices: pd.DataFrame
    paths: pd.DataFrame
    split: OutputSplit
    loss_w_zero: float

    @property
    def matrix_additivity(self) -> tuple[float, float]:
        """(sum of the single leading-term removals' increases, the increase with all removed)."""
        single = self.matrices[self.matrices["matrix"].notna()]["delta_loss"]
        joint = self.matrices.loc[self.matrices["ablation"] == "remove every leading term", "delta_loss"].iloc[0]
        return additivity(single.to_numpy(), joint)

    def _loss(self, row: str) -> float:
        return float(self.matrices.set_index("ablation").loc[row, "loss"])

    def _gain_share(self, loss: float) -> float:
        """Share of the full model's gain over the zero model that a loss of ``loss`` gives back."""
        full = self._loss("full model")
        return (loss - full) / max(self._loss("zero model") - full, 1e-12)

    @property
    def way_back(self) -> float:
        """Share of the way from the full model's loss back to the zero model's with every leading
        component removed (1: the leading terms hold all of the skill)."""
        return self._gain_share(self._loss("remove every leading term"))

    @property
    def idle_share(self) -> float:
        """Share of the full model's gain over the zero model lost with every W := 0."""
        return self._gain_share(self.loss_w_zero)

    @property
    def costliest(self) -> tuple[str, float]:
        """(matrix, loss increase) of the single leading-term removal that costs most."""
        single = self.matrices[self.matrices["matrix"].notna()]
        row = single.loc[single["delta_loss"].idxmax()]
        return str(row["matrix"]), float(row["delta_loss"])

    @property
    def attention_shaping_gap(self) -> float:
        """Largest loss increase from removing a W or P leading term minus the smallest from a W_O or
        V one (negative: the terms that only shape attention cost least)."""
        single = self.matrices[self.matrices["matrix"].notna()]
        soft = single[single["kind"].isin(["W", "P"])]["delta_loss"].max()
        hard = single[single["kind"].isin(["W_O", "V"])]["delta_loss"].min()
        return float(soft - hard)

    @property
    def path_additivity(self) -> tuple[float, float]:
        """(sum of the single attention-layer path removals' increases, the increase with every
        attention path removed)."""
        p = self.paths.set_index("removal")["delta_loss"]
        single = [v for k, v in p.items() if k.startswith("without attention layer")]
        return additivity(single, p["without every attention path"])


def cooperation(state: dict[str, torch.Tensor], model: AttentionModel, stats: Any, tokens: np.ndarray) -> Cooperation:
    """Every chapter-5 experiment of one run (``model`` is loaded with ``state``)."""
    matrices = ablation_table(state, model, stats, tokens)
    model.load_checkpoint(state)
    paths = path_ablation(model, tokens)
    split = output_split(model, stats.B, tokens)
    w_names = [n for n in parameter_names(model.cfg) if n.endswith(".W")]
    return Cooperation(matrices, paths, split, zeroed_loss(model, state, w_names, tokens))


def cached_cooperation(
    state: dict[str, torch.Tensor], model: AttentionModel, stats: Any, tokens: np.ndarray
) -> Cooperation:
    """:func:`cooperation` through the disk cache (key: weights, bases, tokens)."""
    bases = leading.bases(stats)
    key = {
        "state": fingerprint(*(state[k] for k in sorted(state))),
        "bases": fingerprint(*(bases[k] for k in sorted(bases))),
        "tokens": fingerprint(np.ascontiguousarray(tokens, dtype=np.int64)),
    }
    return cached("leading_terms/cooperation", key, lambda: cooperation(state, model, stats, tokens))


@dataclass(frozen=True)
class EvalRuns:
    """Chapter 3's runs as chapter 5 evaluates them: the runs, one model per learning rate, and the
    evaluation sequences (the first ``n_eval`` training sequences)."""

    runs: Any
    models: dict[float, AttentionModel]
    evaluation: np.ndarray

    @property
    def lrs(self) -> tuple[float, ...]:
        return tuple(self.models)

    def experiments(self) -> dict[float, Cooperation]:
        """:func:`cached_cooperation` of every run."""
        return {
            lr: cached_cooperation(self.runs.results[lr].state, model, self.runs.stats, self.evaluation)
            for lr, model in self.models.items()
        }


def eval_runs(runs: Any, n_eval: int) -> EvalRuns:
    """:class:`EvalRuns` of trained (or cached) runs (:class:`mechbook.leading_terms.train.Runs`)."""
    models = {lr: r.model() for lr, r in runs.results.items()}
    return EvalRuns(runs, models, runs.sequences.tokens[:n_eval])
