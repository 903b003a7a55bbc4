"""Chapter 9's whole reading of one trained model, as one typed record: the circuit's attention
roles, what makes layer 1's previous-token head, the layer-2 variable block, the two routes'
residual cosines and the layer-2 attention output against its controls, the adder alone, the
Fourier neurons and the Fourier ablation with its random-frequency control, the number
embeddings, the probes and the patching effect. The same function reads the released final model,
the rule-picked rebuild and every seed of the stack, so the chapter's claims are read over all of
them (no Altair here)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from mechbook.assign_add import circuits, fourier, measures, patching, probes
from mechbook.assign_add.config import TrainResult, load_model
from mechbook.assign_add.task import Task

POOL_SEED, PATCH_SEED = 2, 3
"""Seeds of chapter 9's evaluation pools and of its patching pairs."""
EVAL_POOLS = ("0var_train", "1var_train", "2var_train", "2var_heldout")
"""The pools whose sequences the attention roles and the layer-1 split average over."""
RANDOM_DRAWS = 5
"""Random frequency sets in the restricted-loss control."""


@dataclass(frozen=True)
class CircuitReadings:
    """Every reading chapter 9 takes of one model (see :func:`read_circuits`)."""

    roles: dict[str, float]
    needed_top2: float
    prev_share: float
    qk1_split: dict[str, float]
    diag: dict[str, float]
    comp: pd.DataFrame
    ov2: pd.DataFrame
    adder: float
    adder_residual: float
    fourier: fourier.FourierNeurons
    ablation: fourier.Ablation
    pca: dict[str, pd.DataFrame]
    embedding: fourier.EmbeddingSummary
    probes: pd.DataFrame
    effect: dict[str, float]
    answer_accuracy: float
    output_norms: pd.DataFrame

    def numbers(self) -> dict[str, object]:
        """The headline numbers (chapter 9's records, ``book/thresholds/09_circuits.yml``)."""
        found, table, ab, emb = self.fourier, self.probes, self.ablation, self.embedding
        return {
            "value_to_variable_attention": self.roles["value_to_variable"],
            "eq_to_needed_attention": self.roles["eq_to_needed"],
            "eq_to_needed_top2": self.needed_top2,
            "positional_prev_token_share": self.prev_share,
            "qk1_prev_margin_total": self.qk1_split["total"],
            "qk1_prev_margin_token": self.qk1_split["token"],
            "qk1_prev_margin_positional": self.qk1_split["positional"],
            "qk1_prev_positional_share": self.qk1_split["positional_share"],
            "qk2_block_ratio": self.diag["ratio"],
            "qk2_block_rows_diag_max": self.diag["rows_diag_max"],
            "matched_cosine": float(self.comp["matched"].mean()),
            "mismatched_cosine": float(self.comp["mismatched"].mean()),
            "ov2_matched_cosine": float(self.ov2["matched"].mean()),
            "ov2_shuffled_cosine": float(self.ov2["shuffled"].mean()),
            "ov2_other_pair_cosine": float(self.ov2["other_pair"].mean()),
            "adder_alone_accuracy": self.adder,
            "adder_with_residual_accuracy": self.adder_residual,
            "neurons_fve_ge_0.9": int(len(found.good)),
            "best_neuron_fve": found.best_fve,
            "top_frequencies": [int(k) for k in found.frequencies["k"].head(5)],
            "key_frequencies_n": ab.n_frequencies,
            "adder_loss_full": ab.full,
            "adder_loss_restricted": ab.restricted,
            "adder_loss_excluded": ab.excluded,
            "adder_loss_random_restricted_lowest": ab.random_lowest,
            "adder_loss_nonkey_restricted_lowest": ab.nonkey_lowest,
            "embedding_top2_pc_fraction": emb.top2,
            "embedding_top10_frequency_fraction": emb.top10_frequencies,
            "embedding_circle_score": emb.circle_score,
            "probe_variable_identity_after_layer1": probes.probe_accuracy(table, "variable identity", "after layer 1"),
            "probe_operand_value_after_layer2": probes.probe_accuracy(table, "operand's value", "after layer 2"),
            "probe_answer_at_eq": probes.probe_accuracy(table, "answer", "after layer 2"),
            "model_answer_at_eq": self.answer_accuracy,
            "patching_to_source": self.effect["patched_to_source"],
            "patching_as_source_run": self.effect["patched_as_source_run"],
            "patching_control_unchanged": self.effect["control_unchanged"],
        }


def read_circuits(
    model: torch.nn.Module,
    task: Task,
    pools: dict[str, tuple[np.ndarray, np.ndarray]],
    probe: probes.ProbeConfig,
    n_patch: int,
) -> CircuitReadings:
    """Chapter 9's readings of ``model`` on the evaluation ``pools`` (:meth:`Task.eval_pools`),
    the probes trained with ``probe`` and ``n_patch`` patching pairs."""
    cfg = task.cfg
    eval_tokens = np.concatenate([pools[p][0] for p in EVAL_POOLS])
    found = fourier.fourier_neurons(fourier.mlp2_maps(model, cfg))
    pca = fourier.embedding_pca(model, cfg.modulus)
    layer2_eq = circuits.attention_patterns(model, torch.as_tensor(eval_tokens))[1, :, -1].numpy()
    return CircuitReadings(
        roles=circuits.role_attention(model, eval_tokens, cfg),
        needed_top2=float(measures.top2_hits(layer2_eq, circuits.needed_positions(eval_tokens, cfg)).mean()),
        prev_share=circuits.previous_token_share(circuits.positional_qk(model, 0), range(1, cfg.context_len)),
        qk1_split=circuits.previous_token_score_split(model, eval_tokens, cfg),
        diag=circuits.block_diagonality(circuits.variable_qk_block(model, cfg)),
        comp=circuits.composition_cosines(model, task, "2var"),
        ov2=circuits.ov2_cosines(model, task, "2var"),
        adder=circuits.adder_alone_accuracy(model, cfg.modulus),
        adder_residual=circuits.adder_with_residual_accuracy(model, cfg.modulus),
        fourier=found,
        ablation=fourier.ablation(fourier.direct_logits(model, cfg), found.keys, RANDOM_DRAWS),
        pca=pca,
        embedding=fourier.embedding_summary(pca),
        probes=probes.pooled_probe_table(model, cfg, pools, probe),
        effect=patching.value_patching_effect(model, patching.one_var_patch_pairs(task, n_patch, seed=PATCH_SEED)),
        answer_accuracy=answer_accuracy(model, pools, probes.PROBE_POOLS),
        output_norms=output_norms(model),
    )


def output_norms(model: torch.nn.Module) -> pd.DataFrame:
    """What the layer-2 MLP writes to the logits: the Fourier norm of ``W_out W_U`` per frequency
    over the residues (:func:`mechbook.assign_add.fourier.output_fourier_norms`)."""
    return fourier.output_fourier_norms(model.blocks[1].mlp.W_out.detach().numpy(), model.unembed.W_U.detach().numpy())


@torch.no_grad()
def answer_accuracy(
    model: torch.nn.Module, pools: dict[str, tuple[np.ndarray, np.ndarray]], names: Sequence[str]
) -> float:
    """The model's own accuracy at '=' (its unembedding's argmax) on the sequences of the pools
    ``names``: what the answer probe at '=' is compared with (chapter 9)."""
    tokens = torch.as_tensor(np.concatenate([pools[p][0] for p in names]))
    labels = torch.as_tensor(np.concatenate([pools[p][1] for p in names]))
    return float((model(tokens, last_only=True).argmax(-1) == labels).float().mean())


def read_seed_runs(
    results: Sequence[TrainResult],
    task: Task,
    pools: dict[str, tuple[np.ndarray, np.ndarray]],
    probe: probes.ProbeConfig,
    n_patch: int,
    known: dict[int, CircuitReadings] | None = None,
) -> dict[int, CircuitReadings]:
    """:func:`read_circuits` of the final model of every seed run (``TrainResult`` list, chapter
    9's seed stack), by seed; readings in ``known`` (by seed) are reused, not recomputed."""
    out = dict(known or {})
    for run in results:
        seed = run.config.seed
        if seed not in out:
            out[seed] = read_circuits(load_model(run), task, pools, probe, n_patch)
    return {run.config.seed: out[run.config.seed] for run in results}
