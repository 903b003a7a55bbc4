"""Training-checkpoint schedules and Hugging Face names of the Pythia suite (chapter 6).

Pythia (Biderman et al. 2023) saved step 0, the log-spaced steps 1, 2, 4, ..., 512 and then every
1000 steps up to 143000: 1 + 10 + 143 = 154 checkpoints, published as Git revisions ``step{N}``
of ``EleutherAI/pythia-{size}`` (trained on the Pile, the suite the paper reads: Pythia-1.4B,
no deduplicated variant named) and of ``EleutherAI/pythia-{size}-deduped`` (the deduplicated
Pile). :func:`scaled_schedule` gives a miniature run the same shape: step 0, powers of two below a
linear spacing, then evenly spaced steps to the last one.
"""

from __future__ import annotations

PYTHIA_SIZES: tuple[str, ...] = ("14m", "31m", "70m", "160m", "410m", "1b", "1.4b", "2.8b", "6.9b", "12b")
PYTHIA_LAST_STEP = 143_000
PYTHIA_LINEAR_EVERY = 1_000


def pythia_steps() -> list[int]:
    """The 154 Pythia checkpoint steps: 0, 1, 2, 4, ..., 512, 1000, 2000, ..., 143000."""
    return scaled_schedule(PYTHIA_LAST_STEP, PYTHIA_LINEAR_EVERY)


def revision(step: int) -> str:
    """The Hugging Face revision (Git branch) of a Pythia checkpoint: ``step{step}``."""
    if int(step) != step or step < 0:
        raise ValueError(f"a checkpoint step is a non-negative integer, got {step!r}")
    return f"step{int(step)}"


def repo_id(size: str, deduped: bool = False) -> str:
    """``EleutherAI/pythia-{size}``, the models trained on the Pile that the paper's Pythia-1.4B
    names (``-deduped`` when ``deduped``: trained on the deduplicated Pile instead)."""
    if size not in PYTHIA_SIZES:
        raise ValueError(f"unknown Pythia size {size!r}; choose one of {', '.join(PYTHIA_SIZES)}")
    return f"EleutherAI/pythia-{size}{'-deduped' if deduped else ''}"


def scaled_schedule(last_step: int, linear_every: int) -> list[int]:
    """Step 0, then 1, 2, 4, ... (powers of two below ``linear_every``), then every
    ``linear_every`` steps up to ``last_step`` (which must be a multiple of it).

    ``scaled_schedule(143000, 1000)`` is Pythia's schedule; a miniature run of S steps with n
    evenly spaced late checkpoints uses ``scaled_schedule(S, S // n)``.
    """
    if linear_every < 1 or last_step < linear_every:
        raise ValueError(f"need 1 <= linear_every <= last_step, got linear_every={linear_every}, last_step={last_step}")
    if last_step % linear_every:
        raise ValueError(f"last_step={last_step} must be a multiple of linear_every={linear_every}")
    steps = [0]
    power = 1
    while power < linear_every:
        steps.append(power)
        power *= 2
    steps.extend(range(linear_every, last_step + 1, linear_every))
    return steps
