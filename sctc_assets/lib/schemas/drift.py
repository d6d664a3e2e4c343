"""Columns the drift tables of the term and name benchmarks share (`term_drift`, `name_drift`; `lib/drift.py`)."""

from __future__ import annotations

DRIFT = {
    "epoch_a": ("string", "The first epoch tag (`none`: the untagged answers; `served-<12hex>`: an observed served "
                          "version)."),
    "epoch_b": ("string", "The second epoch tag."),
    "n_design": ("int", "Answers the design asks for here (prompts × trials)."),
    "missing_a": ("int", "Of them, answers of `epoch_a` the cache lacks (not counted, never failing)."),
    "missing_b": ("int", "Of them, answers of `epoch_b` the cache lacks."),
    "n_pairs": ("int", "Answers scored in both epochs (names: valid in both): the pairs of the McNemar test."),
    "mcnemar_b": ("int", "Pairs with the outcome in `epoch_a` and without it in `epoch_b`."),
    "mcnemar_c": ("int", "Pairs without the outcome in `epoch_a` and with it in `epoch_b`."),
    "p_exact": ("float", "Exact (binomial) McNemar p of `mcnemar_b` against `mcnemar_c` (1 without discordant "
                         "pairs)."),
    "served_a": ("list<string>", "The served model ids and system fingerprints the API reported for `epoch_a`."),
    "served_b": ("list<string>", "The same for `epoch_b`."),
}
