"""Ready-made registry entries for the endpoints people have (`data/model_presets.yaml`): OpenAI, OpenRouter, a
local vLLM server and a local llama.cpp server. `sctc models --presets` prints them to copy into the registry."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

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
                        dict(raw["entry"]))
        preset.registry_entry(f"{path}: preset {name!r}")  # the entry must be a valid registry entry
        presets[preset.name] = preset
    return presets


def render_presets(path: str | Path | None = None) -> str:
    """Every preset as a commented registry entry, together one valid registry document."""
    blocks = []
    for preset in load_presets(path).values():
        body = yaml.safe_dump({preset.key: dict(preset.entry)}, allow_unicode=True, sort_keys=False)
        blocks.append(f"  # {preset.title}\n  # setup: {preset.setup}\n" + "".join(f"  {line}\n" for line in body.splitlines()))
    return ("# Registry entries to copy into data/models.yaml (under its `models:`) or into a drop-in file\n"
            "# models.d/<name>.yaml; then `sctc plan --models KEY` and `sctc run --models KEY`.\n"
            "models:\n" + "\n".join(blocks))
