"""`dg scaffold defs sctc_assets.components.Audit <name>`: a commented `defs.yaml` for an audit."""

from __future__ import annotations

import dagster as dg

TEMPLATE = """\
# An audit of model bias across Chinese varieties (sctc-assets): docs/audits-in-your-dagster-project.md
type: sctc_assets.components.Audit

attributes:
  # Every asset key of this audit starts with this prefix (two audits, or an audit beside the package's own
  # location, live side by side).
  key_prefix: {prefix}
  # Benchmarks as `sctc run --benchmarks` takes them: term, name, sovereignty, reviews, corpus, terms_<set>.
  benchmarks: [term]
  # Registry keys of the models under test; each becomes a `models` partition.
  models: [paper-gpt4o, paper-qwen]
  # The model registry (relative to the project root). API keys never go here: an entry names its
  # environment variable (`api_key_env`).
  registry: models.yaml
  # The SC-TC-Bench data, as `--upstream` takes it (folder, archive or URL); leave out for $SCTC_UPSTREAM.
  # upstream: /data/SC-TC-Bench.tar.xz
  # Where the tables go (folder or fsspec URL); leave out for $SCTC_TABLE_STORE, else <data folder>/storage.
  # storage: /data/sctc/storage
  # The response cache (a SQLite file); leave out for $SCTC_DATABASE_URL, where a PostgreSQL URL with its
  # password goes (never in this file), else data/cache/responses.sqlite.
  # cache: /data/sctc/responses.sqlite
  # Run options of `sctc run` (leave out for the registry's, else the paper's). The term benchmark's have
  # attributes of their own:
  # trials: 15
  # prompt_variants: [1, 2, 3]
  # judge: my-judge
  # Any other `sctc run` option that configures the assets, by its name (`sctc run --help`), checked by
  # `sctc run`'s own parser; a list gives several values, `true` a bare flag. They become the audit's asset
  # config defaults, so every run (the UI, `dg launch`, automation) asks with them.
  # options:
  #   sovereignty-samples: 3
  #   name-seed: 7
  #   reviews-pair: [tw, cn]
  #   no-translation-control: true
  # The budget of each Dagster run:
  # max_calls: 10000
  # max_cost_usd: 20
  # Registered item sets to run the term benchmark on too. The sets (with their prompting varieties) and the
  # varieties file come from the code location's environment: $SCTC_ITEM_SETS, $SCTC_VARIETIES (e.g. in .env).
  # item_sets: [csld_straits]
"""


class AuditScaffolder(dg.Scaffolder):
    def scaffold(self, request) -> None:
        prefix = request.target_path.name.replace("-", "_")
        request.target_path.mkdir(parents=True, exist_ok=True)
        (request.target_path / "defs.yaml").write_text(TEMPLATE.format(prefix=prefix), encoding="utf-8")
