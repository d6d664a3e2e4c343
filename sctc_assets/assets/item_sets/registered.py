"""The assets of every registered item set, for the defs folder loader to find."""

from sctc_assets.assets.item_sets.factory import item_set_assets
from sctc_assets.benchmarks import SPECS
from sctc_assets.benchmarks.item_sets import entry_of

ITEM_SET_ASSETS = [assets_def for spec in SPECS.values() if (entry := entry_of(spec)) is not None
                   for assets_def in item_set_assets(spec, entry)]
