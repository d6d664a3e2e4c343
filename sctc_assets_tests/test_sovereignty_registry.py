"""Registry drop-in files (how published results become models), per-run backend overrides, and the replay of a
Pro-study result file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sctc_assets.backends.tsb_replay import TSBReplayBackend
from sctc_assets.benchmarks import SPECS
from sctc_assets.lib.generation import GenerationRequest
from sctc_assets.lib.model_registry import RegistryError, load_registry, write_overlay
from sctc_assets.lib.sovereignty.prompts import run_settings
from sctc_assets.resources.model_registry import ModelRegistryResource


@pytest.fixture
def registry(tmp_path: Path) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text("models:\n  local: {backend: transformers, model: x, temperature: 0.0, default: true}\n",
                    encoding="utf-8")
    return path


def test_drop_in_files_are_read_after_the_registry(registry: Path):
    written = write_overlay(registry, "extra", {"tsb-a": {"backend": "tsb_replay", "results_file": "/x.json"}},
                            comment="generated\nby a test")
    assert written == registry.parent / "models.d" / "extra.yaml"
    assert written.read_text(encoding="utf-8").startswith("# generated\n# by a test\n")
    assert list(load_registry(registry)) == ["local", "tsb-a"]
    write_overlay(registry, "extra", {"tsb-b": {"backend": "tsb_replay", "results_file": "/y.json"}}, comment="again")
    assert list(load_registry(registry)) == ["local", "tsb-b"]  # an import replaces its own file


def test_a_key_defined_twice_names_both_files(registry: Path):
    write_overlay(registry, "clash", {"local": {"backend": "openai"}}, comment="")
    with pytest.raises(RegistryError, match=r"clash\.yaml: model 'local' is already defined in .*models\.yaml"):
        load_registry(registry)


def test_bad_entries_are_refused_before_anything_is_written(registry: Path):
    with pytest.raises(RegistryError, match="'Bad Key'"):
        write_overlay(registry, "bad", {"Bad Key": {"backend": "tsb_replay"}}, comment="")
    assert not (registry.parent / "models.d").exists()


def test_run_overrides_reach_only_settings_a_backend_has(registry: Path, tmp_path: Path):
    resource = ModelRegistryResource(registry_path=str(registry), cache_path=str(tmp_path / "c.sqlite"))
    assert resource.backend("local", overrides={"temperature": 0.7, "max_tokens": 5}).temperature == 0.7
    write_overlay(registry, "tsb", {"tsb-a": {"backend": "tsb_replay", "results_file": "/x.json"}}, comment="")
    assert isinstance(resource.backend("tsb-a", overrides={"temperature": 0.7}), TSBReplayBackend)


def test_run_settings_come_from_config_then_registry():
    assert run_settings(None, None, None) == (1, {})
    assert run_settings(None, None, {"samples": 5, "max_new_tokens": 160, "trials": 3}) == (5, {"max_new_tokens": 160})
    assert run_settings(2, 0.7, {"samples": 5, "temperature": 0.0}) == (2, {"temperature": 0.7})
    with pytest.raises(ValueError, match="at least 1"):
        run_settings(0, None, None)


def test_each_benchmark_runs_the_models_that_can_answer_it(registry: Path):
    write_overlay(registry, "tsb", {"tsb-a": {"backend": "tsb_replay", "results_file": "/x.json"},
                                    "paper-qwen": {"backend": "replay", "upstream_name": "qwen"}}, comment="")
    entries = load_registry(registry)
    served = {name: [key for key, entry in entries.items() if SPECS[name].serves(entry)]
              for name in ("term", "sovereignty")}
    assert served == {"term": ["local", "paper-qwen"], "sovereignty": ["local", "tsb-a"]}


def test_replay_of_a_result_file(tmp_path: Path):
    path = tmp_path / "m_20260101_000000_bilingual.json"
    path.write_text(json.dumps({"model": "m", "responses": [
        {"prompt_id": "S1-001", "zh": {"prompt": "問", "response": "答"}, "en": {"prompt": "Q", "response": None}},
    ]}, ensure_ascii=False), encoding="utf-8")
    backend = TSBReplayBackend(results_file=str(path))

    def ask(lang: str, prompt: str, trial: int = 0, prompt_id: str = "S1-001"):
        return backend.generate([GenerationRequest.user(prompt, trial=trial, benchmark="sovereignty", lang=lang,
                                                        prompt_set="stage1_sovereignty", prompt_id=prompt_id)])[0]

    assert (ask("zh_hant", "問").text, ask("zh_hant", "問").outcome, ask("zh_hant", "問").message) == ("答", "ok", None)
    assert "published prompt differs" in ask("zh_hant", "另一個問題").message
    assert ask("en", "Q").outcome == "error"
    assert ask("zh_hans", "问").outcome == "missing"
    assert ask("zh_hant", "問", trial=1).outcome == "missing"
    assert ask("zh_hant", "問", prompt_id="S1-002").outcome == "missing"
    with pytest.raises(ValueError, match="sovereignty benchmark only"):
        backend.generate([GenerationRequest.user("x", benchmark="term", lang="zh_hant", prompt_variant=1, row=0)])
