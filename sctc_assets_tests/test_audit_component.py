"""The audit Component (`sctc_assets.components.Audit`) in a fresh Dagster project: `dg scaffold defs`, `dg check
defs` (errors naming the attribute), `dg list defs` and `dg launch`, with the rates `sctc run` gives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional

import dagster as dg
import pandas as pd
import pytest

from sctc_assets.cli import main
from sctc_assets.components import Audit
from sctc_assets.assets.partitions import MODELS_PARTITION_NAME

REPO = Path(__file__).resolve().parents[1]
MODELS = ("paper-gpt4o", "paper-qwen")
REGISTRY = ("models:\n  paper-gpt4o: {backend: replay, upstream_name: gpt4o}\n"
            "  paper-qwen: {backend: replay, upstream_name: qwen}\n")
# One process per run: the 2-core CI runner, and the steps of a run share the tables they wrote (io_manager.py).
IN_PROCESS = json.dumps({"execution": {"config": {"in_process": {}}}})


def _dg() -> list[str]:
    """The `dg` command (the `dg` extra, dagster-dg-cli): `$SCTC_DG`, else on PATH."""
    found = os.environ.get("SCTC_DG") or shutil.which("dg")
    if not found:
        message = "dg not found: install the `dg` extra (dagster-dg-cli) or set $SCTC_DG"
        if os.environ.get("SCTC_REQUIRE_DG"):
            pytest.fail(message)
        pytest.skip(message)
    return [found]


def _project(root: Path, audit: str) -> Path:
    """A fresh Dagster 1.13 project: pyproject.toml with `[tool.dg]`, its package with the defs folder."""
    (root / "team_project" / "defs").mkdir(parents=True)
    (root / "pyproject.toml").write_text(
        '[project]\nname = "team-project"\nversion = "0.1.0"\n\n[tool.dg]\ndirectory_type = "project"\n\n'
        '[tool.dg.project]\nroot_module = "team_project"\nregistry_modules = ["sctc_assets.components"]\n',
        encoding="utf-8")
    (root / "team_project" / "__init__.py").write_text("", encoding="utf-8")
    (root / "team_project" / "defs" / "__init__.py").write_text("", encoding="utf-8")
    (root / "team_project" / "definitions.py").write_text(
        "from pathlib import Path\n\nimport dagster as dg\n\n\n@dg.definitions\ndef defs():\n"
        "    return dg.load_from_defs_folder(path_within_project=Path(__file__).parent.parent)\n", encoding="utf-8")
    (root / "models.yaml").write_text(REGISTRY, encoding="utf-8")
    return root / "team_project" / "defs" / audit / "defs.yaml"


def _run(command: list[str], cwd: Path, env: dict) -> str:
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"{' '.join(command)}:\n{output[-4000:]}"
    return output


def _env(root: Path) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(root), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["DAGSTER_HOME"] = str(root / "dagster_home")
    (root / "dagster_home").mkdir(exist_ok=True)
    (root / "dagster_home" / "dagster.yaml").write_text("", encoding="utf-8")
    env["COLUMNS"] = "300"
    return env


@pytest.mark.slow
def test_audit_in_a_fresh_dagster_project(isolated_data_dir, extracted_upstream, tmp_path, monkeypatch):
    dg_command = _dg()
    root = tmp_path / "team"
    defs_yaml = _project(root, "team_audit")
    env = _env(root)

    # `dg scaffold defs` writes a commented defs.yaml; the test fills in this audit's values
    _run([*dg_command, "scaffold", "defs", "sctc_assets.components.Audit", "team_audit"], root, env)
    scaffolded = defs_yaml.read_text(encoding="utf-8")
    assert "type: sctc_assets.components.Audit" in scaffolded and "# Registry keys" in scaffolded
    audit_yaml = ("type: sctc_assets.components.Audit\nattributes:\n  key_prefix: team_audit\n  benchmarks: [term]\n"
                  f"  models: [{', '.join(MODELS)}]\n  registry: models.yaml\n  upstream: {extracted_upstream}\n"
                  "  storage: team-tables\n  options:\n    prompt-variants: [{variants}]\n")
    # a bad run option: `dg check defs` fails naming it, with `sctc run`'s own check
    defs_yaml.write_text(audit_yaml.format(variants="1, 4"), encoding="utf-8")
    failed = subprocess.run([*dg_command, "check", "defs"], cwd=root, env=env, capture_output=True, text=True,
                            timeout=600)
    assert failed.returncode != 0
    assert "options.prompt-variants: argument --prompt-variants: invalid choice: 4" in failed.stdout + failed.stderr
    # the run option reaches the runs `dg launch` starts with no ops config (the paper's first variant only; the
    # `sctc run` below passes the same option)
    defs_yaml.write_text(audit_yaml.format(variants="1"), encoding="utf-8")

    assert "All definitions loaded successfully" in _run([*dg_command, "check", "defs"], root, env)
    listed = _run([*dg_command, "list", "defs", "--json"], root, env)
    keys = {asset["asset_key"] for asset in json.loads(listed[listed.index("{"):])["assets"]}
    assert {"team_audit/term_responses", "team_audit/term_choice_rates", "team_audit/term_choice_tests"} <= keys
    # nothing of the package's own location but the observed served models, one per location (a fact about the
    # registry's endpoints that every audit's automation reads)
    assert {key for key in keys if "/" not in key} == {"served_model"}

    # the models partitions, as the audit's sensor adds them
    with dg.DagsterInstance.from_config(str(root / "dagster_home")) as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, list(MODELS))
    model = "paper-qwen"
    _run([*dg_command, "launch", "--job", "team_audit_term_inputs", "--config-json", IN_PROCESS], root, env)
    for lang in ("zh_hans", "zh_hant"):
        _run([*dg_command, "launch", "--job", "team_audit_term_model_lang", "--partition", f"{lang}|{model}",
              "--config-json", IN_PROCESS], root, env)
    _run([*dg_command, "launch", "--job", "team_audit_term_per_model", "--partition", model,
          "--config-json", IN_PROCESS], root, env)
    audit_rates = pd.read_parquet(root / "team-tables" / "team_audit" / "term_choice_rates" / f"partition={model}.parquet")
    assert set(audit_rates["prompt_variant"]) == {1}  # the audit's `prompt-variants: [1]`, not the default 1 2 3

    # the same models through `sctc run` (the package's own location, the test's data folder)
    registry = tmp_path / "models.yaml"
    registry.write_text(REGISTRY, encoding="utf-8")
    monkeypatch.setenv("SCTC_MODELS", str(registry))
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "term", "--models", *MODELS, "--prompt-variants", "1",
                 "--out", str(out)]) == 0
    run_rates = pd.read_parquet(out / "term_choice_rates.parquet")
    run_rates = run_rates[run_rates["model"] == model].reset_index(drop=True)
    columns = list(audit_rates.columns)
    order = ["lang", "prompt_variant", "label_source", "subset"]
    pd.testing.assert_frame_equal(audit_rates.sort_values(order).reset_index(drop=True)[columns],
                                  run_rates.sort_values(order).reset_index(drop=True)[columns], check_dtype=False)
    # by hand: the rates are the label shares of the stored labels
    labels = pd.concat(pd.read_parquet(path) for path in
                       (root / "team-tables" / "team_audit" / "term_labels" / f"model={model}").glob("*.parquet"))
    for (lang, variant, source), frame in labels.groupby(["lang", "prompt_variant", "label_source"]):
        row = audit_rates[(audit_rates["lang"] == lang) & (audit_rates["prompt_variant"] == variant)
                          & (audit_rates["label_source"] == source) & (audit_rates["subset"] == "all")].iloc[0]
        scored = frame[frame["label"].isin(["correct", "misaligned", "incorrect"])]
        assert row["n"] == len(scored)
        assert row["pct_correct"] == pytest.approx(100 * (scored["label"] == "correct").sum() / len(scored))
        assert row["pct_misaligned"] == pytest.approx(100 * (scored["label"] == "misaligned").sum() / len(scored))
    assert len(labels.groupby(["lang", "prompt_variant", "label_source"])) == len(
        audit_rates[audit_rates["subset"] == "all"])


def test_bad_attribute_is_named():
    with pytest.raises(Exception, match="benchmarks"):
        Audit(key_prefix="team", benchmarks=["termz"], models=["m"])
    with pytest.raises(Exception, match="key_prefix"):
        Audit(key_prefix="9 bad", benchmarks=["term"], models=["m"])
    with pytest.raises(Exception, match="(?s)cache.*password does not go in the YAML"):
        Audit(key_prefix="team", benchmarks=["term"], models=["m"], cache="postgresql://sctc:secret@db/sctc")
    assert Audit(key_prefix="team", benchmarks=["term"], models=["m"], cache="postgresql://db/sctc").cache
    with pytest.raises(Exception, match="prompt_variants"):
        Audit(key_prefix="team", benchmarks=["term"], models=["m"], prompt_variants=[4])


def _audit_yaml(prefix: str, models: str, storage: str = "tables") -> str:
    return (f"type: sctc_assets.components.Audit\nattributes:\n  key_prefix: {prefix}\n  benchmarks: [term]\n"
            f"  models: [{models}]\n  registry: models.yaml\n  storage: {storage}\n  trials: 3\n")


def test_two_audits_side_by_side_share_the_location_resources(tmp_path, monkeypatch):
    root = tmp_path / "team"
    first = _project(root, "first")
    first.parent.mkdir(parents=True)
    first.write_text(_audit_yaml("first", "paper-qwen"), encoding="utf-8")
    second = root / "team_project" / "defs" / "second" / "defs.yaml"
    second.parent.mkdir(parents=True)
    second.write_text(_audit_yaml("second", "paper-gpt4o"), encoding="utf-8")
    monkeypatch.syspath_prepend(str(root))

    defs = dg.load_from_defs_folder(path_within_project=root)
    graph = defs.resolve_asset_graph()
    keys = {key.to_user_string() for key in graph.get_all_asset_keys()}
    assert {"first/term_responses", "second/term_responses", "first/term_choice_rates"} <= keys
    assert {key for key in keys if not key.startswith(("first/", "second/"))} == {"served_model"}
    # the package's own definitions: same partitions, pools, code versions and automation under the prefix
    from sctc_assets.definitions import defs as own

    own_graph = own.resolve_asset_graph()
    for name in ("term_responses", "term_labels", "term_choice_rates", "term_choice_tests"):
        node, mine = graph.get(dg.AssetKey(["first", name])), own_graph.get(dg.AssetKey(name))
        assert node.code_version == mine.code_version and node.pools == mine.pools
        assert node.partitions_def == mine.partitions_def
        assert node.automation_condition == mine.automation_condition
        assert {dep.path[-1] for dep in node.parent_keys} == {dep.path[-1] for dep in mine.parent_keys}
        assert all(dep.path[0] == "first" for dep in node.parent_keys if dep.path != ["served_model"])
    # each audit's run options are its stage jobs' config; its models, its sensor's
    job = defs.resolve_job_def("second_term_model_lang")
    assert job.run_config_schema is not None
    assert {sensor.name for sensor in defs.sensors} == {"first_models", "first_automation", "second_models",
                                                        "second_automation", "sctc_served_models"}
    assert defs.resources["models"].registry_path == str(root / "models.yaml")
    assert defs.resources["io_manager"].base_dir == str(root / "tables")

    # an audit that configures the shared resources otherwise is named, with the attribute
    second.write_text(_audit_yaml("second", "paper-gpt4o", storage="elsewhere"), encoding="utf-8")
    with pytest.raises(Exception) as raised:
        dg.load_from_defs_folder(path_within_project=root)
    error, messages = raised.value, []
    while error is not None:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    assert any("storage differ from audit first's in the same code location" in message for message in messages)


def _options_yaml(prefix: str, benchmarks: str, options: str, extra: str = "") -> str:
    return (f"type: sctc_assets.components.Audit\nattributes:\n  key_prefix: {prefix}\n  benchmarks: [{benchmarks}]\n"
            f"  models: [paper-qwen]\n  registry: models.yaml\n  storage: tables\n{extra}  options:\n{options}")


def _load(root: Path, monkeypatch) -> dg.Definitions:
    """The project's definitions, as `dg` loads them; its package is this project's, not another test's."""
    for name in [name for name in sys.modules if name == "team_project" or name.startswith("team_project.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(root))
    return dg.load_from_defs_folder(path_within_project=root)


def _messages(error: BaseException) -> str:
    seen = []
    while error is not None and error not in seen:
        seen.append(error)
        error = error.__cause__ or error.__context__
    return "\n".join(map(str, seen))


def test_run_options_reach_the_stage_jobs_through_the_run_parser(tmp_path, monkeypatch):
    root = tmp_path / "team"
    defs_yaml = _project(root, "team")
    defs_yaml.parent.mkdir(parents=True)
    # names with and without `--`, an integer, a float, a list, a flag and a shorthand attribute, from the YAML
    defs_yaml.write_text(_options_yaml(
        "team", "term, sovereignty, reviews",
        "    sovereignty-samples: 3\n    --sovereignty-temperature: 0.5\n    reviews-pair: [TW, cn]\n"
        "    no-translation-control: true\n    max-pairs: 40\n", extra="  trials: 4\n"), encoding="utf-8")
    defs = _load(root, monkeypatch)

    def partition_config(job: str, partition: str) -> dict:
        return defs.resolve_job_def(job).get_run_config_for_partition_key(partition)["ops"]

    sovereignty = partition_config("team_sovereignty_model_lang", "en|paper-qwen")
    # argparse's types: "3" is the int 3 and 0.5 the float, as `sctc run --sovereignty-samples 3` gives
    assert sovereignty["sovereignty_responses"]["config"] == {"samples": 3, "temperature": 0.5}
    assert partition_config("team_term_model_lang", "zh_hans|paper-qwen")["term_responses"]["config"] == {"trials": 4}
    from sctc_assets.benchmarks import SPECS

    reviews = partition_config("team_reviews_model_format", f"{SPECS['reviews'].langs[0]}|paper-qwen")
    assert reviews["review_predictions"]["config"] == {"max_pairs": 40, "translation_control": False}
    inputs = dg.validate_run_config(defs.resolve_job_def("team_reviews_inputs"), {})["ops"]
    assert inputs["review_pairs"]["config"]["pair"] == ["tw", "cn"]  # the spec's config lower-cases, as for a run

    # the same namespace `sctc run` parses from the same options, so the config is the command's, value by value
    from sctc_assets.cli import run_parser

    argv = ["--sovereignty-samples", "3", "--sovereignty-temperature", "0.5", "--reviews-pair", "TW", "cn",
            "--no-translation-control", "--max-pairs", "40", "--trials", "4"]
    by_cli = vars(run_parser().parse_args(argv))
    audit = Audit(key_prefix="team", benchmarks=["term", "sovereignty", "reviews"], models=["m"], trials=4,
                  options={"sovereignty-samples": 3, "--sovereignty-temperature": 0.5, "reviews-pair": ["TW", "cn"],
                           "no-translation-control": True, "max-pairs": 40})
    assert audit.options_namespace() == by_cli
    for name in ("term", "sovereignty", "reviews"):
        assert SPECS[name].config(audit.options_namespace()) == SPECS[name].config(by_cli)


@pytest.mark.parametrize(("options", "message"), [
    ({"sovereignty-samples": "three"}, "options.sovereignty-samples: argument --sovereignty-samples: invalid int "
                                       "value: 'three'"),
    ({"sovereignty-samples": 0}, r"options.sovereignty-samples: must be in \[1, ∞\), got 0"),
    ({"sovereignty-temperature": 3}, r"options.sovereignty-temperature: must be in \[0, 2\], got 3"),
    ({"--name-list-source": "mine"}, "options.--name-list-source: argument --name-list-source: invalid choice: 'mine'"),
    ({"sovereignty-sample": 3}, "options.sovereignty-sample: no such `sctc run` option"),
    ({"name_seed": 7}, "options.name_seed: no such `sctc run` option \\(did you mean name-seed\\?\\)"),
    ({"reviews-pair": ["tw", "xx"]}, "options.reviews-pair: unknown review variety xx"),
    ({"trials": 16}, r"trials: must be in \[1, 15\], got 16"),
    ({"max-calls": 10}, "options.max-calls: not asset configuration: use the attribute max_calls"),
    ({"max-cost": 1}, "options.max-cost: not asset configuration: use the attribute max_cost_usd"),
    ({"models": ["a"]}, "options.models: not asset configuration: use the attribute models"),
    ({"out": "x"}, "options.out: not asset configuration: an audit's tables are in the attribute storage"),
    ({"dry-run": True}, "options.dry-run: not asset configuration: `sctc plan`"),
    ({"no-wait": True}, "options.no-wait: not asset configuration: a setting of the `sctc run` command itself"),
    ({"varieties": ["zh-TW"]}, "options.varieties: not asset configuration: defines an item set"),
    ({"tsb-upstream": "/data"}, r"options.tsb-upstream: not asset configuration: set \$SCTC_TSB_UPSTREAM"),
    ({"name-seed": 7}, "options.name-seed: configures name, which this audit does not run"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(Exception, match=message):
        Audit(key_prefix="team", benchmarks=["term", "sovereignty", "reviews"], models=["m"], options=options)


def test_an_option_given_twice_is_named():
    with pytest.raises(Exception, match="options.trials: given twice \\(also as the attribute trials\\)"):
        Audit(key_prefix="team", benchmarks=["term"], models=["m"], trials=3, options={"trials": 4})
    with pytest.raises(Exception, match="options.--trials: given twice \\(also as options.trials\\)"):
        Audit(key_prefix="team", benchmarks=["term"], models=["m"], options={"trials": 4, "--trials": 4})


def test_check_defs_names_the_option(tmp_path, monkeypatch):
    root = tmp_path / "team"
    defs_yaml = _project(root, "team")
    defs_yaml.parent.mkdir(parents=True)
    defs_yaml.write_text(_options_yaml("team", "sovereignty", "    sovereignty-samples: many\n"), encoding="utf-8")
    with pytest.raises(Exception) as raised:
        _load(root, monkeypatch)
    assert "options.sovereignty-samples: argument --sovereignty-samples: invalid int value: 'many'" in \
        _messages(raised.value)


def test_the_options_are_the_audit_assets_config_defaults_so_runs_without_config_use_them():
    """Automation condition sensors launch runs with no run config (as do `dg launch --partition` and the UI's
    Materialize): the audit's options are its own assets' config defaults, so those runs ask with them too; the
    automation conditions and code versions stay the package's, and the package's own assets keep theirs."""
    from sctc_assets.definitions import defs as own

    own_graph = own.resolve_asset_graph()
    tuned = Audit(key_prefix="tuned", benchmarks=["sovereignty"], models=["m"],
                  options={"sovereignty-samples": 3}).build_defs(None)
    graph = tuned.resolve_asset_graph()
    for key in graph.get_all_asset_keys():
        if key.path[0] == "tuned":
            mine = own_graph.get(dg.AssetKey(key.path[-1]))
            assert graph.get(key).automation_condition == mine.automation_condition
            assert graph.get(key).code_version == mine.code_version
    for job, expected in (("tuned_sovereignty_model_lang", 3), ("sovereignty_model_lang", None)):
        definitions = tuned if job.startswith("tuned") else own
        resolved = dg.validate_run_config(definitions.resolve_job_def(job), {})["ops"]
        assert resolved["sovereignty_responses"]["config"]["samples"] == expected
    # a run's own config still wins
    explicit = {"ops": {"sovereignty_responses": {"config": {"samples": 2}}}}
    assert dg.validate_run_config(tuned.resolve_job_def("tuned_sovereignty_model_lang"), explicit)[
        "ops"]["sovereignty_responses"]["config"]["samples"] == 2


class _Settings(dg.Config):
    samples: Optional[int] = None
    pair: Optional[list[str]] = None


def _answers(config):
    return {"samples": config.samples, "pair": config.pair}


# a real annotation (this module's are strings, which Dagster does not resolve for a Config parameter)
_answers.__annotations__ = {"config": _Settings, "return": dict}
answers = dg.asset(name="answers")(_answers)


def test_config_defaults_reach_the_asset_body():
    """The rewritten defaults are what the asset's `Config` holds when a run gives none, and a run's config wins."""
    from sctc_assets.components import _with_config_defaults

    audited = _with_config_defaults(answers, {"samples": 3, "pair": ("tw", "cn")})
    assert audited.code_versions_by_key == answers.code_versions_by_key and audited.key == answers.key
    result = dg.materialize([audited])
    assert result.output_for_node("answers") == {"samples": 3, "pair": ["tw", "cn"]}
    result = dg.materialize([audited], run_config={"ops": {"answers": {"config": {"samples": 5}}}})
    assert result.output_for_node("answers") == {"samples": 5, "pair": ["tw", "cn"]}
    assert dg.materialize([answers]).output_for_node("answers") == {"samples": None, "pair": None}


def test_every_stage_job_of_an_audit_of_every_benchmark_resolves():
    """Dagster's prefixing of asset checks drops an `additional_ins` input (the reviews' `review_pairs_aligned` reads
    `review_varieties`); the audit prefixes such checks itself, so its reviews jobs resolve like the others."""
    from sctc_assets.benchmarks import BENCHMARKS

    defs = Audit(key_prefix="team", benchmarks=list(BENCHMARKS), models=["m"]).build_defs(None)
    for job in defs.jobs:
        defs.resolve_job_def(job.name)
    check = dg.AssetCheckKey(dg.AssetKey(["team", "review_pairs"]), "review_pairs_aligned")
    checks = next(checks for checks in defs.asset_checks if check in checks.check_keys)
    assert dict(checks.keys_by_input_name) == {
        "review_pairs": dg.AssetKey(["team", "review_pairs"]),
        "review_varieties": dg.AssetKey(["team", "review_varieties"])}


def test_the_scaffolded_options_are_options_of_an_audit():
    """The commented `options:` example that `dg scaffold defs` writes holds real `sctc run` options."""
    import yaml

    from sctc_assets.benchmarks import BENCHMARKS
    from sctc_assets.components.scaffold import TEMPLATE

    lines = TEMPLATE.splitlines()
    start = lines.index("  # options:")
    block = [line.replace("  #   ", "", 1) for line in lines[start + 1:] if line.startswith("  #   ")]
    example = yaml.safe_load("\n".join(block[:next((i for i, line in enumerate(block) if not line.strip()), None)]))
    assert len(example) >= 3
    audit = Audit(key_prefix="team", benchmarks=list(BENCHMARKS), models=["m"], options=example)
    assert audit.options_namespace()["sovereignty_samples"] == example["sovereignty-samples"]


def test_a_served_model_change_starts_the_answers_of_an_audit_with_options_as_of_one_without():
    """Evaluated as the automation sensor evaluates it: after a model's served version changes, the answers of an
    audit start again whether or not its options configure them (the run it launches takes the options from the
    asset's config defaults)."""
    from sctc_assets.assets.served_models import observation
    from sctc_assets.lib.served_model import ServedVersion

    model, partition = "watched", dg.MultiPartitionKey({"model": "watched", "lang": "en"})
    plain = Audit(key_prefix="plain", benchmarks=["sovereignty"], models=[model]).build_defs(None)
    tuned = Audit(key_prefix="tuned", benchmarks=["sovereignty"], models=[model],
                  options={"sovereignty-samples": 3}).build_defs(None)
    defs = dg.Definitions.merge(plain, dg.Definitions(assets=[asset for asset in tuned.assets
                                                              if not isinstance(asset, dg.SourceAsset)]))
    answers = [dg.AssetKey([prefix, "sovereignty_responses"]) for prefix in ("plain", "tuned")]
    selection = dg.AssetSelection.assets(*answers)
    with dg.instance_for_test() as instance:
        instance.add_dynamic_partitions(MODELS_PARTITION_NAME, [model])
        instance.report_runless_asset_event(observation(model, ServedVersion("m-0801", "fp-1")))
        for key in answers:
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=key, partition=partition))
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, asset_selection=selection)
        assert all(not tick.get_requested_partitions(key) for key in answers)
        instance.report_runless_asset_event(observation(model, ServedVersion("m-0915", "fp-2")))
        tick = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=tick.cursor,
                                                 asset_selection=selection)
        assert all(tick.get_requested_partitions(key) == {partition} for key in answers)
