"""The `sctc` command line: fast commands import no Dagster, everything is checked before a run starts, presets,
budget flags, and `sctc ui` passing its signals on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from sctc_assets.benchmarks import BENCHMARKS
from sctc_assets.cli import BUDGET_SCOPE_ENV_VAR, _parser, main
from sctc_assets.cli.run import apply_budget
from sctc_assets.cli.selection import chosen_benchmarks

REPO = Path(__file__).resolve().parents[1]
HEAVY_MODULES = ("dagster", "torch", "transformers")


def _imported_after(argv: list[str], env: dict[str, str] | None = None) -> dict:
    """Run `sctc <argv>` in a fresh interpreter and report its exit status, which heavy modules it imported and
    which modules of the command line (`sctc_assets.cli.*`) it loaded."""
    code = textwrap.dedent(f"""
        import json, sys
        from sctc_assets.cli import main
        try:
            status = main({argv!r})
        except SystemExit as exit:
            status = exit.code
        print(json.dumps({{"status": status, "heavy": [m for m in {HEAVY_MODULES!r} if m in sys.modules],
                          "commands": sorted(m for m in sys.modules if m.startswith("sctc_assets.cli."))}}))
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True,
                          env={**os.environ, **(env or {})})
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("argv, commands", [(["--help"], []), (["run", "--help"], []), (["plan", "--help"], []),
                                            (["terms", "define", "--help"], []), (["docs", "--help"], []),
                                            (["models", "--presets"],
                                             ["sctc_assets.cli.models", "sctc_assets.cli.presets"])])
def test_quick_commands_import_neither_dagster_nor_torch(argv, commands, tmp_path):
    """The parser loads no command module (a `--help` stops before one is chosen); `sctc models` loads its own and
    the presets it lists (`cli/presets.py`), neither importing Dagster at its top."""
    outcome = _imported_after(argv, {"DAGSTER_HOME": str(tmp_path / "home")})
    assert outcome == {"status": 0, "heavy": [], "commands": commands}


def test_sctc_models_checks_settings_without_importing_a_builtin_backend(tmp_path):
    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  good: {backend: replay, upstream_name: qwen}\n"
                        "  typo: {backend: openai, model: m, max_token: 5}\n", encoding="utf-8")
    outcome = _imported_after(["models", "--registry", str(registry)], {"DAGSTER_HOME": str(tmp_path / "home")})
    assert outcome == {"status": 2, "heavy": [], "commands": ["sctc_assets.cli.models", "sctc_assets.cli.presets"]}


def test_benchmarks_all_means_every_benchmark_in_order():
    assert chosen_benchmarks(["all"]) == list(BENCHMARKS) == ["term", "name", "sovereignty", "reviews", "corpus"]
    assert chosen_benchmarks(["name", "term", "name"]) == ["name", "term"]
    args = _parser().parse_args(["run", "--benchmarks", "all"])
    assert chosen_benchmarks(args.benchmarks) == list(BENCHMARKS)


@pytest.fixture
def registry(tmp_path, monkeypatch, isolated_data_dir):
    path = tmp_path / "models.yaml"
    path.write_text(textwrap.dedent("""\
        models:
          fake: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', name: fake}
          keyed: {backend: openai, model: m, api_key_env: SCTC_TEST_KEY_NOT_SET}
          typo: {backend: openai, model: m, api_key_env: "", max_token: 5}
          badvalue: {backend: openai, model: m, api_key_env: "", concurrency: zero}
          nobackend: {backend: nosuchbackend}
          trials: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', benchmarks: {term: {trials: 40}}}
          unknownkey: {backend: 'sctc_assets_tests.fakes:ScriptedBackend', benchmarks: {term: {trial: 2}, terms: {}}}
        """), encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(path))
    monkeypatch.delenv("SCTC_TEST_KEY_NOT_SET", raising=False)
    return path


def _errors(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]


def test_out_of_range_options_are_all_reported_before_anything_runs(registry, capsys, isolated_data_dir):
    # Each benchmark's problems together, in the specs' order (each spec's option_ranges, then check_options), then
    # the run's own options.
    status = main(["run", "--benchmarks", "term", "name", "sovereignty", "reviews", "corpus", "--models", "fake",
                   "--trials", "1000000000", "--name-lists", "0", "--sovereignty-samples", "0", "--sovereignty-temperature",
                   "3", "--max-pairs", "0", "--corpus-majority", "0", "--max-calls", "-1", "--max-cost", "-2.5",
                   "--reviews-columns", "nosuchfield=x", "--reviews-varieties", "hk=hk"])
    errors = _errors(capsys)
    assert status == 2
    assert errors == [
        "error: --trials: must be in [1, 15], got 1000000000",  # as typed, not 1e+09
        "error: --name-lists: must be in [1, ∞), got 0",
        "error: --sovereignty-samples: must be in [1, ∞), got 0",
        "error: --sovereignty-temperature: must be in [0, 2], got 3",
        "error: --max-pairs: must be in [1, ∞), got 0",
        "error: --reviews-columns: unknown field 'nosuchfield' (fields: hotel_id, nationality, score, title, "
        "positive, negative, review_id, review_time)",
        "error: --reviews-varieties: hk=hk: the variety must be one of tw, cn",
        "error: --corpus-majority: must be in (0, 1], got 0",
        "error: --max-calls: must be in [0, ∞), got -1",
        "error: --max-cost: must be in [0, ∞), got -2.5",
    ]
    assert not (isolated_data_dir / "storage").exists()  # no stage ran


def test_every_broken_registry_entry_is_one_line_naming_file_model_and_setting(registry, capsys, isolated_data_dir):
    status = main(["run", "--models", "fake", "keyed", "typo", "badvalue", "nobackend", "trials", "unknownkey", "ghost",
                   "--judge", "nojudge"])
    errors = _errors(capsys)
    assert status == 2
    where = f"error: {registry}: model"
    assert any(line.startswith("error: not in the registry") and "ghost" in line for line in errors)
    assert f"{where} 'typo': unknown setting(s) 'max_token' for the 'openai' backend" in "\n".join(errors)
    assert any(line.startswith(f"{where} 'badvalue' (openai): concurrency:") for line in errors)
    assert any(line.startswith(f"{where} 'nobackend': unknown backend 'nosuchbackend'") for line in errors)
    assert any(line.startswith(f"{where} 'trials': benchmarks.term") and "between 1 and 15, got 40" in line
               for line in errors)
    assert (f"{where} 'unknownkey': benchmarks.term: unknown setting(s) 'trial' "
            "(settings: max_new_tokens, prompt_variants, trials)") \
        in errors
    assert any(line.startswith(f"{where} 'unknownkey': benchmarks.terms is no benchmark") for line in errors)
    assert any(line.startswith(f"{where} 'keyed': environment variable SCTC_TEST_KEY_NOT_SET is not set")
               for line in errors)
    assert "error: --judge: 'nojudge' is not in the registry (see `sctc models`)" in errors
    assert len(errors) == 9 and not any("fake" in line for line in errors)
    assert not (isolated_data_dir / "storage").exists()


@pytest.mark.parametrize("encoding", ["big5", "gb18030", "utf-16"])
def test_a_registry_that_is_not_utf8_is_named_with_its_encoding(tmp_path, capsys, monkeypatch, encoding):
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    registry = tmp_path / "models.yaml"
    monkeypatch.setenv("SCTC_MODELS", str(registry))  # `--registry` sets it; undone after the test
    description = "台灣的模型，這是測試用的說明" if encoding == "big5" else "台湾的模型，这是测试用的说明"
    registry.write_bytes(f"models:\n  m: {{backend: replay, upstream_name: qwen, description: {description}}}\n"
                         .encode(encoding))
    assert main(["models", "--registry", str(registry)]) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: {registry}: not UTF-8 text (byte 0x") and f"it looks like {encoding}" in error


def test_budget_flags_become_the_budget_environment_with_a_scope_per_run(monkeypatch):
    for name in ("SCTC_MAX_CALLS", "SCTC_MAX_COST_USD", BUDGET_SCOPE_ENV_VAR):
        monkeypatch.setenv(name, "")  # recorded, so what apply_budget sets is undone after the test
        monkeypatch.delenv(name)
    apply_budget(_parser().parse_args(["run"]))
    assert BUDGET_SCOPE_ENV_VAR not in os.environ  # no budget asked, no scope set
    apply_budget(_parser().parse_args(["run", "--max-calls", "25", "--max-cost", "0.5"]))
    assert (os.environ["SCTC_MAX_CALLS"], os.environ["SCTC_MAX_COST_USD"]) == ("25", "0.5")
    assert os.environ[BUDGET_SCOPE_ENV_VAR].startswith("sctc-run-")
    monkeypatch.setenv(BUDGET_SCOPE_ENV_VAR, "shared-across-runs")
    apply_budget(_parser().parse_args(["run", "--max-calls", "3"]))
    assert os.environ[BUDGET_SCOPE_ENV_VAR] == "shared-across-runs"


# --- presets ---------------------------------------------------------------------------------------------------------

KEYED_PRESETS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY", "gemini": "GEMINI_API_KEY",
                 "deepseek": "DEEPSEEK_API_KEY", "openrouter": "OPENROUTER_API_KEY"}


def test_every_preset_is_a_valid_registry_entry_whose_only_problem_is_a_missing_key(monkeypatch):
    from sctc_assets.cli.presets import load_presets, render_presets
    from sctc_assets.cli.validation import backend_problems, key_problem

    presets = load_presets()
    assert set(presets) == set(KEYED_PRESETS) | {"ollama", "vllm", "llama-cpp"}
    document = yaml.safe_load(render_presets())
    assert list(document["models"]) == [preset.key for preset in presets.values()]
    for name in KEYED_PRESETS.values():
        monkeypatch.delenv(name, raising=False)
    for preset in presets.values():
        entry = preset.registry_entry("presets")
        assert backend_problems(entry) == []
        assert (key_problem(entry) is not None) == (preset.name in KEYED_PRESETS)
        if preset.name in KEYED_PRESETS:
            assert preset.entry["api_key_env"] == KEYED_PRESETS[preset.name]
            # a list price says when and where it was read, and `sctc models --presets` shows it
            assert preset.prices_read and preset.price_source.startswith("https://")
            assert f"read {preset.prices_read} from {preset.price_source}" in render_presets()
    assert {preset.entry["backend"] for preset in presets.values()} == {"openai", "anthropic", "gemini"}
    assert presets["openrouter"].entry["base_url"] == "https://openrouter.ai/api/v1"
    assert set(presets["openrouter"].entry["headers"]) == {"HTTP-Referer", "X-Title"}
    assert presets["vllm"].entry["api_key_env"] == presets["llama-cpp"].entry["api_key_env"] == \
        presets["ollama"].entry["api_key_env"] == ""


def test_a_priced_preset_without_the_date_of_its_prices_is_refused_naming_it(tmp_path):
    from sctc_assets.lib.model_registry import RegistryError
    from sctc_assets.cli.presets import load_presets

    entry = {"backend": "openai", "model": "m", "price_input_per_mtok": 1.0, "price_output_per_mtok": 2.0}
    cases = {"undated": ({}, "needs `prices_read`"),
             "bad-date": ({"prices_read": "last week", "price_source": "https://example.com"}, "not a date"),
             "bad-source": ({"prices_read": "2026-12-07", "price_source": "the website"}, r"not an http\(s\) URL")}
    for name, (provenance, expected) in cases.items():
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"presets": {name: {"key": name, **provenance, "entry": entry}}}),
                        encoding="utf-8")
        with pytest.raises(RegistryError, match=expected) as refused:
            load_presets(path)
        assert f"preset {name!r}" in str(refused.value) and str(path) in str(refused.value)


def test_presets_answer_through_a_stub_of_their_api_with_their_headers(monkeypatch):
    from sctc_assets.backends import backend_class
    from sctc_assets.lib.generation import GenerationRequest
    from sctc_assets.cli.presets import load_presets
    from sctc_assets_tests.anthropic_stub_server import StubAnthropicServer
    from sctc_assets_tests.gemini_stub_server import StubGeminiServer
    from sctc_assets_tests.openai_stub_server import StubOpenAIServer

    for preset, variable in KEYED_PRESETS.items():
        monkeypatch.setenv(variable, f"sk-{preset}-test-key")
    stubs = {"openai": StubOpenAIServer(), "anthropic": StubAnthropicServer(), "gemini": StubGeminiServer()}
    with stubs["openai"], stubs["anthropic"], stubs["gemini"]:
        for preset in load_presets().values():
            backend_name = preset.entry["backend"]
            backend = backend_class(backend_name)(**{**preset.entry_settings(),
                                                     "base_url": stubs[backend_name].base_url, "max_retries": 0})
            results = backend.generate([GenerationRequest.user(f"哪一個詞？ {preset.name}")])
            assert [result.outcome for result in results] == ["ok"], (preset.name, results[0].message)
        seen = {request.prompt.split()[-1]: request for stub in stubs.values() for request in stub.requests}
    assert set(seen) == set(KEYED_PRESETS) | {"ollama", "vllm", "llama-cpp"}
    assert seen["openrouter"].headers.get("http-referer") == "https://github.com/sctc-assets/sctc-assets"
    assert seen["openrouter"].headers.get("x-title") == "sctc-assets"
    assert seen["openrouter"].authorization == "Bearer sk-openrouter-test-key"
    assert seen["openai"].authorization == "Bearer sk-openai-test-key"
    assert seen["deepseek"].authorization == "Bearer sk-deepseek-test-key"
    assert seen["anthropic"].headers["x-api-key"] == "sk-anthropic-test-key"
    assert seen["gemini"].headers["x-goog-api-key"] == "sk-gemini-test-key"
    # the reasoning model's preset sends the token limit as its API wants it, and no temperature
    assert seen["openai"].body["max_completion_tokens"] == 2048 and "temperature" not in seen["openai"].body
    assert "x-title" not in seen["vllm"].headers
    assert seen["vllm"].body["model"] == "Qwen/Qwen2.5-7B-Instruct" and seen["vllm"].body["seed"] == 2024
    assert seen["llama-cpp"].body["model"] == "qwen2.5-coder-0.5b-instruct"
    assert seen["gemini"].body["generationConfig"]["thinkingConfig"] == {"includeThoughts": True}


def test_a_header_that_carries_a_credential_is_refused():
    import pydantic

    from sctc_assets.backends.openai_backend import OpenAIBackend

    for name in ("Authorization", "X-Api-Key", "api_key", "X-Auth-Token"):
        with pytest.raises(pydantic.ValidationError, match="looks like a credential"):
            OpenAIBackend(model="m", headers={name: "secret"})
    assert OpenAIBackend(model="m", headers={"X-Title": "ok"}).headers == {"X-Title": "ok"}


# --- sctc ui ---------------------------------------------------------------------------------------------------------

CHILD = """
import signal, sys, time
log = open(sys.argv[1], "a")
def stop(signum, frame):
    log.write(f"got {signal.Signals(signum).name}\\n"); log.flush()
    time.sleep(0.3)  # shutting down takes a moment; the parent must wait for it
    log.write("cleaned up\\n"); log.flush()
    sys.exit(3)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
log.write("ready\\n"); log.flush()
while True:
    time.sleep(0.05)
"""


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM])
def test_ui_passes_sigint_and_sigterm_to_its_child_and_waits_for_it(tmp_path, sent):
    child, log = tmp_path / "child.py", tmp_path / "child.log"
    child.write_text(CHILD, encoding="utf-8")
    parent = subprocess.Popen([sys.executable, "-c", "import sys; from sctc_assets.cli.ui import run_forwarding_signals; "
                               f"sys.exit(run_forwarding_signals([sys.executable, {str(child)!r}, {str(log)!r}]))"],
                              cwd=REPO)
    deadline = time.monotonic() + 60
    while not (log.exists() and "ready" in log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "ready" in log.read_text()
    parent.send_signal(sent)
    assert parent.wait(timeout=30) == 3  # the child's own exit status, after its clean-up
    assert log.read_text().splitlines() == ["ready", f"got {sent.name}", "cleaned up"]


def test_ui_runs_dagster_dev_through_the_forwarder(monkeypatch, tmp_path):
    import sctc_assets.cli.ui as ui

    seen = {}
    monkeypatch.setattr(ui, "run_forwarding_signals",
                        lambda command, env: seen.update(command=command, env=env) or 0)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PYTHONWARNINGS", "error::DeprecationWarning")  # the user's filters are kept
    assert main(["ui", "--port", "3123"]) == 0
    assert seen["command"][:6] == [sys.executable, "-m", "dagster", "dev", "-p", "3123"]
    assert seen["env"]["PYTHONWARNINGS"] == f"error::DeprecationWarning,{ui.QUIET_SUPERSESSION}"


def test_every_option_of_sctc_ui_says_what_it_does(capsys):
    with pytest.raises(SystemExit):
        main(["ui", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "--port PORT the port to serve the UI on, at 127.0.0.1 (default 3000)" in text
    assert "--upstream PATH|URL SC-TC-Bench data" in text


def test_only_the_models_a_benchmark_runs_are_checked(tmp_path, monkeypatch, capsys, isolated_data_dir):
    registry = tmp_path / "models.yaml"
    registry.write_text("models:\n  broken: {backend: nosuchbackend, default: true}\n", encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    # Without --models the review benchmark runs no model, so the broken default stands in nobody's way ...
    assert main(["plan", "--benchmarks", "reviews"]) == 0
    assert "no model: only the model-independent assets run" in capsys.readouterr().out
    # ... while the term benchmark would run it.
    assert main(["plan", "--benchmarks", "term"]) == 2
    assert "model 'broken': unknown backend 'nosuchbackend'" in capsys.readouterr().err


def test_started_in_the_background_sctc_gives_sigint_its_default_handler(tmp_path):
    # `nohup sctc run … &` from a non-interactive shell: SIGINT arrives ignored.
    script = ("import signal, sys\n"
              "from sctc_assets.cli import main\n"
              "assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN\n"
              "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
              "sys.stderr.write(repr(signal.getsignal(signal.SIGINT) is signal.default_int_handler))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert done.stderr.strip().endswith("True"), done.stderr


@pytest.mark.parametrize("argv, status, stream, text", [
    (["plan", "--benchmarks", "term", "--models", "paper-qwen"], 0, "stdout", "paper-qwen"),
    (["plan", "--benchmarks", "nosuchbenchmark"], 2, "stderr", "nosuchbenchmark"),
])
def test_the_program_exits_with_main_s_status_and_all_it_printed(argv, status, stream, text):
    """`python -m sctc_assets.cli` (and the `sctc` script) end through `program`, which skips Python's last
    collection: the status and every line printed, piped, must still arrive."""
    done = subprocess.run([sys.executable, "-m", "sctc_assets.cli", *argv], cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == status, done.stderr
    assert text in getattr(done, stream)
