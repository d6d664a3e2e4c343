"""Ready-made registry entries for the endpoints people have (`data/model_presets.yaml`): OpenAI, Anthropic, Google
Gemini, DeepSeek, OpenRouter, and local Ollama, vLLM and llama.cpp servers. `sctc models --presets` prints them to
copy into the registry. A priced preset says when its list prices were read and where (`prices_read`,
`price_source`), so a reader knows how old they are."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import datetime
from urllib.parse import urlsplit

import yaml

from sctc_assets.lib.paths import shipped_data_dir
from sctc_assets.lib.model_registry import ModelEntry, RegistryError, parse_registry
from sctc_assets.lib.yaml_files import load_yaml

PRESETS_FILE = "model_presets.yaml"


@dataclass(frozen=True)
class Preset:
    name: str
    title: str
    setup: str
    key: str
    entry: Mapping[str, Any]
    prices_read: str | None = None  # the date (YYYY-MM-DD) the entry's list prices were read
    price_source: str | None = None  # the page they were read from

    def registry_entry(self, source: str = PRESETS_FILE) -> ModelEntry:
        return parse_registry({"models": {self.key: dict(self.entry)}}, source=source)[self.key]

    def entry_settings(self) -> dict[str, Any]:
        """The backend settings of the entry (without `backend`, `description` and the other reserved keys)."""
        return dict(self.registry_entry().settings)


def presets_path() -> Path:
    return shipped_data_dir() / PRESETS_FILE


def load_presets(path: str | Path | None = None) -> dict[str, Preset]:
    path = Path(path or presets_path())
    document = load_yaml(path, what="model presets", error=RegistryError)
    if not isinstance(document, Mapping) or not isinstance(document.get("presets"), Mapping):
        raise RegistryError(f"{path}: expected a top-level `presets:` mapping")
    presets = {}
    for name, raw in document["presets"].items():
        if not isinstance(raw, Mapping) or not isinstance(raw.get("entry"), Mapping):
            raise RegistryError(f"{path}: preset {name!r}: expected `title`, `setup`, `key` and an `entry` mapping")
        preset = Preset(str(name), str(raw.get("title", name)), str(raw.get("setup", "")), str(raw.get("key", name)),
                        dict(raw["entry"]), *_price_provenance(path, name, raw))
        preset.registry_entry(f"{path}: preset {name!r}")  # the entry must be a valid registry entry
        presets[preset.name] = preset
    return presets


def _price_provenance(path: Path, name: Any, raw: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """`prices_read` and `price_source` of a preset: required when its entry has a price (a price without its date
    cannot be told from a stale one), a date and an http(s) URL."""
    read, source = raw.get("prices_read"), raw.get("price_source")
    priced = any(raw["entry"].get(field) is not None for field in ("price_input_per_mtok", "price_output_per_mtok"))
    where = f"{path}: preset {name!r}"
    if priced and (read is None or source is None):
        raise RegistryError(f"{where}: a priced entry needs `prices_read` (the date the prices were read, "
                            "YYYY-MM-DD) and `price_source` (the page they were read from)")
    if read is not None:
        try:
            read = (read if isinstance(read, datetime.date) else datetime.date.fromisoformat(str(read))).isoformat()
        except ValueError:
            raise RegistryError(f"{where}: prices_read {read!r} is not a date (YYYY-MM-DD)") from None
    if source is not None and (urlsplit(str(source)).scheme not in ("http", "https")
                               or not urlsplit(str(source)).hostname):
        raise RegistryError(f"{where}: price_source {source!r} is not an http(s) URL")
    return read, None if source is None else str(source)


def render_presets(path: str | Path | None = None) -> str:
    """Every preset as a commented registry entry, together one valid registry document."""
    blocks = []
    for preset in load_presets(path).values():
        body = yaml.safe_dump({preset.key: dict(preset.entry)}, allow_unicode=True, sort_keys=False)
        prices = (f"  # list prices (USD per million tokens) read {preset.prices_read} from {preset.price_source}\n"
                  if preset.prices_read else "")
        blocks.append(f"  # {preset.title}\n  # setup: {preset.setup}\n{prices}"
                      + "".join(f"  {line}\n" for line in body.splitlines()))
    return ("# Registry entries to copy into data/models.yaml (under its `models:`) or into a drop-in file\n"
            "# models.d/<name>.yaml; then `sctc plan --models KEY` and `sctc run --models KEY`.\n"
            "models:\n" + "\n".join(blocks))
