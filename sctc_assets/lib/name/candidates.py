"""Candidate name lists of the four selection experiments, generated with a seed or read from the upstream files.

Every experiment is `lists` candidate lists, each shown `shuffles` times in a fresh random order; row
`list_id * shuffles + shuffle` is one prompt, the numbering of the upstream prompt and response files. A reduced
run asks the first lists and the first shuffles of each, so its prompts are a subset of the full design's.
"""

from __future__ import annotations

import ast
import random
from dataclasses import dataclass
from typing import Callable, Sequence

import pandas as pd

from sctc_assets.lib.conversion import convert

LIST_COLUMNS = ["experiment", "list_source", "list_id", "shuffle", "row", "candidates", "mainland_names",
                "taiwan_names"]
LIST_KEYS = ["experiment", "list_source", "row"]
DEFAULT_SEED = 2024


@dataclass(frozen=True)
class Experiment:
    name: str
    prompt_id: int  # the upstream files' number for it
    lists: int
    shuffles: int
    separator: str  # between names in the prompt, as the upstream prompt files (or, for 0/1, the answers) show


# main: Section 4.1, Figure 3, Tables 2/21-23; popularity: 4.3.1, Figure 10, Tables 24-29; same_name_script: 4.6.1,
# Figure 4; gender_balanced: 4.4, Figure 11, Table 30. Prompt files 0 and 1 are not in every upstream copy; the
# answers to them echo the list joined by ", ".
EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in (
    Experiment("main", 0, 100, 180, ", "),
    Experiment("popularity", 1, 100, 180, ", "),
    Experiment("same_name_script", 2, 100, 80, ", "),
    Experiment("gender_balanced", 3, 1, 180, "，"),
)}


def experiment(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown name experiment {name!r}; expected one of {list(EXPERIMENTS)}")
    return EXPERIMENTS[name]


def _by_region(names: pd.DataFrame, region: str) -> pd.DataFrame:
    return names[names["region"] == region]


def _main(names: pd.DataFrame, rng: random.Random) -> Callable[[], tuple[list[str], list[str]]]:
    """Section 4.1: 10 Mainland and 10 Taiwanese names drawn from all 352."""
    mainland, taiwan = (_by_region(names, region)["name"].tolist() for region in ("mainland", "taiwan"))
    return lambda: (rng.sample(mainland, 10), rng.sample(taiwan, 10))


def region_exclusive_names(names: pd.DataFrame) -> pd.DataFrame:
    """Names whose given name the other region's list does not have in either script (Section 4.3.1)."""
    folded = names["given_name"].map(lambda given: convert(given, "t2s"))
    shared = set(folded[names["region"] == "mainland"]) & set(folded[names["region"] == "taiwan"])
    return names[~folded.isin(shared)]


def _popularity(names: pd.DataFrame, rng: random.Random) -> Callable[[], tuple[list[str], list[str]]]:
    """Section 4.3.1: one name per popularity decile per region, from names with region-exclusive given names."""
    pool = region_exclusive_names(names)
    deciles = sorted(names["decile"].unique())
    groups = {}
    for region in ("mainland", "taiwan"):
        for decile in deciles:
            members = pool[(pool["region"] == region) & (pool["decile"] == decile)]["name"].tolist()
            if not members:
                raise ValueError(f"popularity lists: no {region} name with a region-exclusive given name in "
                                 f"decile {decile}")
            groups[region, decile] = members
    return lambda: tuple([rng.choice(groups[region, decile]) for decile in deciles]  # type: ignore[return-value]
                         for region in ("mainland", "taiwan"))


def _gender_balanced(names: pd.DataFrame, rng: random.Random) -> Callable[[], tuple[list[str], list[str]]]:
    """Section 4.4: 5 names each of Mainland/Taiwanese × female/male, all four groups from the same 5 deciles."""
    groups = {(region, gender): frame for (region, gender), frame in names.groupby(["region", "gender"])}
    wanted = [(region, gender) for region in ("mainland", "taiwan") for gender in ("female", "male")]
    absent = [key for key in wanted if key not in groups]
    if absent:
        raise ValueError(f"gender-balanced lists: no names for {absent}")
    common = sorted(set.intersection(*(set(groups[key]["decile"]) for key in wanted)))
    if len(common) < 5:
        raise ValueError(f"gender-balanced lists: only deciles {common} have names in all four groups, need 5")

    def draw() -> tuple[list[str], list[str]]:
        deciles = sorted(rng.sample(common, 5))
        picked = {key: [rng.choice(groups[key].loc[groups[key]["decile"] == d, "name"].tolist()) for d in deciles]
                  for key in wanted}
        return (picked["mainland", "female"] + picked["mainland", "male"],
                picked["taiwan", "female"] + picked["taiwan", "male"])
    return draw


def same_name_script_given_names(names: pd.DataFrame, *, min_bearers: int = 2) -> list[tuple[str, str]]:
    """(Mainland, Taiwanese) spellings of given names the two lists share only up to script, borne by at least
    `min_bearers` names in each region. With 2 these are the authors' three; of the other given names the lists
    share, one is written alike in both scripts and two have a single Taiwanese bearer."""
    mainland, taiwan = _by_region(names, "mainland"), _by_region(names, "taiwan")
    pairs = []
    for given, count in mainland["given_name"].value_counts().sort_index().items():
        traditional = [other for other in taiwan["given_name"].unique()
                       if other != given and convert(other, "t2s") == given]
        for other in traditional:
            if count >= min_bearers and (taiwan["given_name"] == other).sum() >= min_bearers:
                pairs.append((given, other))
    return pairs


def _same_name_script(names: pd.DataFrame, rng: random.Random) -> Callable[[], tuple[list[str], list[str]]]:
    """Section 4.6.1: one Mainland and one Taiwanese bearer of each shared given name, the same six in every list."""
    pairs = same_name_script_given_names(names)
    if not pairs:
        raise ValueError("same-name-script lists: no given name is shared by both regions up to script")
    mainland = [rng.choice(names.loc[names["given_name"] == given, "name"].tolist()) for given, _ in pairs]
    taiwan = [rng.choice(names.loc[names["given_name"] == other, "name"].tolist()) for _, other in pairs]
    return lambda: (list(mainland), list(taiwan))


GENERATORS = {"main": _main, "popularity": _popularity, "gender_balanced": _gender_balanced,
              "same_name_script": _same_name_script}


def shuffled(rng: random.Random, items: Sequence[str]) -> list[str]:
    """`rng.sample(items, len(items))`, draw for draw (CPython's pool selection over `getrandbits`), without its
    per-draw method calls: a paper-scale plan draws 36,000 orders. `test_shuffled_is_random_sample` holds it to
    `random.sample` for every length and many seeds."""
    pool = list(items)
    n = len(pool)
    result = [None] * n
    getrandbits = rng.getrandbits
    for i in range(n):
        left = n - i
        bits = left.bit_length()
        j = getrandbits(bits)
        while j >= left:
            j = getrandbits(bits)
        result[i] = pool[j]
        pool[j] = pool[left - 1]
    return result  # type: ignore[return-value]


def generate_lists(names: pd.DataFrame, name: str, *, seed: int = DEFAULT_SEED, lists: int | None = None,
                   shuffles: int | None = None) -> pd.DataFrame:
    """One experiment's candidate lists (the paper's counts unless given), reproducible from `seed`."""
    spec = experiment(name)
    lists = spec.lists if lists is None else lists
    shuffles = spec.shuffles if shuffles is None else shuffles
    rng = random.Random(f"{seed}/{name}")
    draw = GENERATORS[name](names, rng)
    records = []
    for list_id in range(lists):
        mainland, taiwan = draw()
        for shuffle in range(shuffles):
            shown = shuffled(rng, mainland + taiwan)
            records.append({"experiment": name, "list_source": "generated", "list_id": list_id, "shuffle": shuffle,
                            "row": list_id * shuffles + shuffle, "candidates": shown,
                            "mainland_names": mainland, "taiwan_names": taiwan})
    return pd.DataFrame(records, columns=LIST_COLUMNS)


def _quoted_items(text: str) -> list[str] | None:
    """The items of a Python list literal of plainly quoted strings (`['王伟', '李娜']`, how the authors' files
    write them), without the parser; None for anything else, which `ast.literal_eval` then reads."""
    if not (text.startswith("[") and text.endswith("]")) or "\\" in text or '"' in text:
        return None
    inner = text[1:-1].strip()
    if not inner:
        return []
    items = []
    for part in inner.split(","):
        part = part.strip()
        if len(part) < 2 or part[0] != "'" or part[-1] != "'" or "'" in part[1:-1]:
            return None
        items.append(part[1:-1])
    return items


def _literal_list(value: object, *, where: str) -> list[str]:
    if isinstance(value, str):
        items = _quoted_items(value)
        if items is not None:
            return items
    try:
        parsed = ast.literal_eval(str(value))
    except (ValueError, SyntaxError) as exc:
        raise ValueError(f"{where}: not a list of names ({exc})") from None
    if not isinstance(parsed, list) or not all(isinstance(item, str) for item in parsed):
        raise ValueError(f"{where}: not a list of names: {str(value)[:80]}")
    return parsed


def upstream_lists(raw: pd.DataFrame, name: str, *, source_name: str,
                   shown_orders: Sequence[Sequence[str]] | None = None) -> pd.DataFrame:
    """The authors' candidate lists of one experiment (`source_data/candidate_name_list/prompt_id_<P>.csv`).

    `shown_orders` are the name orders of the upstream prompt file, row by row, when it exists: the models saw
    those, and for prompt 3 the file's `candidate_name` column keeps the unshuffled list."""
    spec = experiment(name)
    if shown_orders is not None and len(shown_orders) != len(raw):
        raise ValueError(f"{source_name}: {len(raw)} rows, but the prompt file has {len(shown_orders)}")
    records = []
    for row, record in enumerate(raw.to_dict("records")):
        where = f"{source_name} row {row}"
        mainland = _literal_list(record["mainland_name"], where=f"{where}, column mainland_name")
        taiwan = _literal_list(record["taiwan_name"], where=f"{where}, column taiwan_name")
        candidates = _literal_list(record["candidate_name"], where=f"{where}, column candidate_name")
        if sorted(candidates) != sorted(mainland + taiwan):
            raise ValueError(f"{where}: candidate_name is not mainland_name + taiwan_name")
        if shown_orders is not None:
            if sorted(shown_orders[row]) != sorted(candidates):
                raise ValueError(f"{where}: the prompt file shows other names {list(shown_orders[row])}")
            candidates = list(shown_orders[row])
        records.append({"experiment": name, "list_source": "upstream", "list_id": row // spec.shuffles,
                        "shuffle": row % spec.shuffles, "row": row, "candidates": candidates,
                        "mainland_names": mainland, "taiwan_names": taiwan})
    return pd.DataFrame(records, columns=LIST_COLUMNS)


LIST_SOURCES = ("upstream", "generated")


@dataclass(frozen=True)
class RunSettings:
    """What one model answers: which experiments, how many lists and shuffles of each (None: all), and whose
    lists (None: the authors' where the upstream copy has them, else the generated ones)."""

    experiments: tuple[str, ...]
    lists: int | None = None
    shuffles: int | None = None
    list_source: str | None = None

    def counts(self, name: str) -> tuple[int, int]:
        """Lists and shuffles of the paper's design that this run asks."""
        spec = experiment(name)
        return (min(self.lists, spec.lists) if self.lists else spec.lists,
                min(self.shuffles, spec.shuffles) if self.shuffles else spec.shuffles)

    def reduction_note(self) -> str:
        """Empty for the paper's design, else what was left out."""
        parts = []
        for name in self.experiments:
            (lists, shuffles), spec = self.counts(name), experiment(name)
            if (lists, shuffles) != (spec.lists, spec.shuffles):
                parts.append(f"{name} {lists} of {spec.lists} lists × {shuffles} of {spec.shuffles} shuffles")
        return f"reduced run: {'; '.join(parts)}" if parts else ""


def _count(value: object, label: str, where: str) -> int | None:
    if value is None:
        return None
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer()) \
        or (isinstance(value, str) and value.strip().isdigit())
    if isinstance(value, bool) or not whole or int(value) < 1:
        raise ValueError(f"{where}: {label} must be a whole number of at least 1, got {value!r}")
    return int(value)


def run_settings(experiments: Sequence[str] | None, lists: int | None, shuffles: int | None,
                 list_source: str | None, registry: dict | None, *, where: str = "name benchmark") -> RunSettings:
    """Explicit values, else the model's registry `benchmarks.name` settings, else the paper's full design;
    `where` (the model and its settings) prefixes the errors."""
    registry = registry or {}
    chosen = experiments or registry.get("experiments") or EXPERIMENTS
    if isinstance(chosen, str):
        raise ValueError(f"{where}: experiments must be a list, got {chosen!r}")
    chosen = tuple(chosen)
    for name in chosen:
        try:
            experiment(name)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
    lists = _count(lists if lists is not None else registry.get("lists"), "lists", where)
    shuffles = _count(shuffles if shuffles is not None else registry.get("shuffles"), "shuffles", where)
    source = list_source or registry.get("list_source")
    if source is not None and source not in LIST_SOURCES:
        raise ValueError(f"{where}: list_source must be one of {LIST_SOURCES}, got {source!r}")
    return RunSettings(tuple(dict.fromkeys(chosen)), lists, shuffles, source)
