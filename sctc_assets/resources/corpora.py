"""The corpus registry as a Dagster resource."""

from __future__ import annotations

from typing import Optional

import dagster as dg
from pydantic import Field

from sctc_assets.lib.corpus.corpus_registry import CorpusEntry, CorpusRegistryError, load_corpora
from sctc_assets.lib.paths import default_corpora_path


class CorpusRegistryResource(dg.ConfigurableResource):
    """Corpora by key (`data/corpora.yaml` or `$SCTC_CORPORA`): source, script, shards and record limit."""

    registry_path: Optional[str] = Field(default=None, description="Corpus registry YAML; default $SCTC_CORPORA "
                                                                   "or data/corpora.yaml.")

    def path(self) -> str:
        return str(self.registry_path or default_corpora_path())

    def entries(self) -> dict[str, CorpusEntry]:
        return load_corpora(self.path())

    def entry(self, key: str) -> CorpusEntry:
        entries = self.entries()
        if key not in entries:
            raise CorpusRegistryError(f"{self.path()}: no corpus {key!r} (known: {', '.join(sorted(entries))})")
        return entries[key]
