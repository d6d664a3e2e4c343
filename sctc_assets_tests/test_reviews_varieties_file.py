"""Any pair of varieties from a file (`--reviews-varieties-file FILE`, `--reviews-pair pt-pt pt-br`): a fictional
export of European and Brazilian Portuguese hotel reviews, written here, runs end to end through `sctc run` with
the project's stub OpenAI server, in the Portuguese prompts the file gives; the metrics equal a hand computation;
bad files and pairs stop the run with one line naming the file, the row and the column."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from scipy.stats import binomtest

from sctc_assets.benchmarks.reviews import reviews_option_problems
from sctc_assets.cli import main
from sctc_assets.lib.reviews.declared import read_varieties_file
from sctc_assets.lib.reviews.scripts import token_count
from sctc_assets.lib.reviews.varieties import review_text
from sctc_assets.lib.schemas import frame_problems
from sctc_assets.lib.schemas.reviews import review_tables
from sctc_assets_tests.openai_stub_server import StubOpenAIServer, StubReply, completion

KEY_ENV = "SCTC_TEST_REVIEWS_PT_KEY"
SYSTEM = "És um assistente que avalia comentários de hotéis"
STRUCTURED = ("Segue-se o comentário de um hóspede sobre um hotel. Com base no título, nos pontos positivos e nos "
              "pontos negativos abaixo, dá uma nota global de 1 a 10. Responde só com o número.\n\n"
              "Título: {title}\nPontos positivos: {positive}\nPontos negativos: {negative}\nNota global (1-10):")
TEXT = ("Segue-se o comentário de um hóspede sobre um hotel. Com base no texto abaixo, dá uma nota global de 1 a "
        "10. Responde só com o número.\n\nComentário: {text}\nNota global (1-10):")
VARIETIES_YAML = f"""\
varieties:
  - code: pt-pt
    prompt_language: pt
    display_name: European Portuguese
    short_name: European
    regions: [PT, Portugal]
    system_prompt: "{SYSTEM}"
    structured_prompt: {STRUCTURED!r}
    text_prompt: {TEXT!r}
  - code: pt-br
    prompt_language: pt
    display_name: Brazilian Portuguese
    short_name: Brazilian
    regions: [BR, Brasil]
"""
# Fictional reviews written for this test: (hotel, score, European title/positive/negative, Brazilian ones); the
# two reviews of a row share hotel, rating class and 10-token length bin.
PAIRED = [
    ("h1", 9, "Excelente", "O pequeno-almoço era muito bom e o quarto limpo.", "",
     "Excelente", "O café da manhã era muito bom e o quarto limpo.", ""),
    ("h1", 8, "Boa estadia", "Pessoal simpático.", "A casa de banho era pequena.",
     "Boa estadia", "Equipe simpática.", "O banheiro era pequeno."),
    ("h1", 5, "Razoável", "Perto do comboio.", "Barulho na rua.",
     "Razoável", "Perto do trem.", "Barulho na rua."),
    ("h1", 2, "Mau", "", "O frigorífico não funcionava e ninguém ajudou.",
     "Ruim", "", "A geladeira não funcionava e ninguém ajudou."),
    ("h2", 10, "Perfeito", "Tudo impecável, voltaremos.", "",
     "Perfeito", "Tudo impecável, voltaremos.", ""),
    ("h2", 7, "Bom", "Boa localização junto à paragem de autocarro.", "Quarto escuro.",
     "Bom", "Boa localização perto do ponto de ônibus.", "Quarto escuro."),
    ("h2", 4, "Fraco", "Barato.", "Sem rede no telemóvel.",
     "Fraco", "Barato.", "Sem sinal no celular."),
    ("h2", 3, "Desiludido", "Vista bonita.", "Fila enorme na receção.",
     "Decepcionado", "Vista bonita.", "Fila enorme na recepção."),
]
# Left out: a reviewer of neither variety.
UNPAIRED = [("h1", 9, "AO", "Bom", "Gostei.", "")]
BRAZILIAN_WORDS = ("café da manhã", "banheiro", "trem", "geladeira", "ônibus", "celular", "Equipe")


def stub_answer(prompt: str) -> str:
    """The stub rater: 9 when the review uses a Brazilian word, else 6."""
    return "9" if any(word in prompt for word in BRAZILIAN_WORDS) else "6"


class PortugueseRater(StubOpenAIServer):
    def echo(self, prompt: str, body: dict[str, Any]) -> StubReply:
        return completion(stub_answer(prompt))


def _export(path: Path) -> Path:
    rows = []
    for hotel, score, *texts in PAIRED:
        for region, (title, positive, negative) in (("PT", texts[:3]), ("Brasil", texts[3:])):
            rows.append({"review_id": f"p{len(rows):02d}", "hotel__booking_id": hotel, "user_nationality": region,
                         "score": score, "review_title": title, "positive_review": positive,
                         "negative_review": negative})
    for hotel, score, region, title, positive, negative in UNPAIRED:
        rows.append({"review_id": f"p{len(rows):02d}", "hotel__booking_id": hotel, "user_nationality": region,
                     "score": score, "review_title": title, "positive_review": positive, "negative_review": negative})
    pd.DataFrame(rows).to_csv(path, index=False)
    return path


def test_the_fixture_rows_are_aligned_pairs():
    for hotel, score, *texts in PAIRED:
        sides = pd.DataFrame({"title": [texts[0], texts[3]], "positive": [texts[1], texts[4]],
                              "negative": [texts[2], texts[5]]})
        assert len({(token_count(text) - 1) // 10 for text in review_text(sides)}) == 1, (hotel, score)


@pytest.fixture
def stub(isolated_data_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-test")
    monkeypatch.delenv("SCTC_REVIEWS", raising=False)
    with PortugueseRater() as server:
        registry = tmp_path / "models.yaml"
        registry.write_text("models:\n  stub-pt: {backend: openai, base_url: '" + server.base_url + "', api_key_env: "
                            f"{KEY_ENV}, max_retries: 0, model: stub-pt}}\n", encoding="utf-8")
        yield server, registry


def test_a_portuguese_pair_from_a_file_runs_end_to_end(stub, tmp_path, capsys):
    server, registry = stub
    varieties_file = tmp_path / "varieties.yaml"
    varieties_file.write_text(VARIETIES_YAML, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["run", "--benchmarks", "reviews", "--reviews", str(_export(tmp_path / "reviews.csv")),
                 "--reviews-varieties-file", str(varieties_file), "--reviews-pair", "pt-pt", "pt-br",
                 "--models", "stub-pt", "--registry", str(registry), "--out", str(out)]) == 0
    printed = capsys.readouterr().out

    # the file's regions map the reviewers (PT, Brasil) to the varieties; the Angolan review is left out
    varieties = pd.read_parquet(out / "review_varieties.parquet")
    assert sorted(varieties.variety.unique()) == ["pt-br", "pt-pt"] and len(varieties) == 2 * len(PAIRED)
    pairs = pd.read_parquet(out / "review_pairs.parquet")
    assert len(pairs) == len(PAIRED) and "review_id_pt_pt" in pairs and "score_pt_br" in pairs
    tables = {spec.table: spec for spec in review_tables("pt_pt", "pt_br")}
    assert not frame_problems(pairs, tables["review_pairs"])

    # the file's Portuguese prompts for both varieties (pt-br takes its language's), no OpenCC control
    prompts = pd.read_parquet(out / "review_prompts.parquet")
    assert set(prompts.system) == {SYSTEM} and set(prompts.version) == {"original"}
    assert prompts.prompt.str.startswith("Segue-se o comentário de um hóspede").all()
    assert {request.body["messages"][0]["content"] for request in server.requests} == {SYSTEM}

    # By hand: the stub's answer for each review as written, accuracy and squared error per side.
    predictions = pd.read_parquet(out / "review_predictions.parquet")
    structured = predictions[predictions.format == "structured"].set_index("review_id")["prediction"]
    truth, pred = {"pt_pt": [], "pt_br": []}, {"pt_pt": [], "pt_br": []}
    for hotel, score, *texts in PAIRED:
        for suffix, (title, positive, negative) in (("pt_pt", texts[:3]), ("pt_br", texts[3:])):
            truth[suffix].append(score)
            pred[suffix].append(int(stub_answer(STRUCTURED.format(title=title, positive=positive,
                                                                  negative=negative))))
    by_pair = pairs.set_index("review_id_pt_pt")
    assert sorted(structured[by_pair.index].tolist()) == sorted(pred["pt_pt"])
    metrics = pd.read_parquet(out / "review_metrics.parquet")
    assert not frame_problems(metrics, tables["review_metrics"])
    assert set(metrics.analysis) == {"length", "confound"}
    row = metrics[(metrics.format == "structured") & (metrics.analysis == "length") & (metrics.subset == "all")].iloc[0]
    right = {suffix: [p == t for p, t in zip(pred[suffix], truth[suffix])] for suffix in truth}
    only_pt = sum(a and not b for a, b in zip(right["pt_pt"], right["pt_br"]))
    only_br = sum(b and not a for a, b in zip(right["pt_pt"], right["pt_br"]))
    assert row.n_pairs == len(PAIRED)
    assert row.acc_pt_pt == pytest.approx(100 * sum(right["pt_pt"]) / len(PAIRED))
    assert row.acc_pt_br == pytest.approx(100 * sum(right["pt_br"]) / len(PAIRED))
    assert (row.only_pt_pt_correct, row.only_pt_br_correct) == (only_pt, only_br)
    assert row.mcnemar_p == pytest.approx(binomtest(only_br, only_pt + only_br, 0.5).pvalue)
    mse = {suffix: sum((p - t) ** 2 for p, t in zip(pred[suffix], truth[suffix])) / len(PAIRED) for suffix in truth}
    assert (row.mse_pt_pt, row.mse_pt_br) == (pytest.approx(mse["pt_pt"]), pytest.approx(mse["pt_br"]))
    assert row.delta_mse == pytest.approx(mse["pt_br"] - mse["pt_pt"])
    assert "Aligned review pairs: 8 (pt-pt vs pt-br" in printed and "Δ = pt-br − pt-pt" in printed


def test_a_csv_varieties_file_reads_like_the_yaml_one(tmp_path):
    path = tmp_path / "varieties.csv"
    pd.DataFrame([{"code": "pt-pt", "prompt_language": "pt", "display_name": "European Portuguese",
                   "regions": "PT; Portugal", "system_prompt": SYSTEM, "structured_prompt": STRUCTURED,
                   "text_prompt": TEXT},
                  {"code": "zh-hk", "prompt_language": "en", "display_name": "Hong Kong Cantonese",
                   "short_name": "Hong Kong", "opencc": "s2hk", "regions": "HK"}]).to_csv(path, index=False)
    portuguese, hongkong = read_varieties_file(path)
    assert portuguese.regions == ("pt", "portugal") and portuguese.prompts == (SYSTEM, STRUCTURED, TEXT)
    assert portuguese.short_name == "European Portuguese" and portuguese.conversion is None
    assert hongkong.conversion == "s2hk" and hongkong.prompts is None and hongkong.suffix == "zh_hk"


@pytest.mark.parametrize("rows, problem", [
    ("  - {code: pt-pt, prompt_language: pt, display_name: European Portuguese, system_prompt: s, "
     "structured_prompt: '{title} {positive} {negative}', text_prompt: '{text}'}\n"
     "  - {code: pt-br, display_name: Brazilian Portuguese}\n",
     "row 2, column prompt_language: missing (each variety needs code, prompt_language, display_name)"),
    ("  - {code: zh-hk, prompt_language: en, display_name: Hong Kong, opencc: s2xx}\n",
     "row 1, column opencc: unknown OpenCC configuration 's2xx' (known: s2t, t2s, s2tw, tw2s, s2hk, hk2s, s2twp, "
     "tw2sp)"),
    ("  - {code: en-au, prompt_language: en, display_name: Australian English}\n"
     "  - {code: pt-br, prompt_language: pt, display_name: Brazilian Portuguese}\n",
     "row 2, column structured_prompt: no rating prompts in prompt language 'pt' (built in: en); give "
     "system_prompt, structured_prompt and text_prompt on a row of that language"),
    ("  - {code: pt-br, prompt_language: pt, display_name: Brazilian Portuguese, system_prompt: s, "
     "structured_prompt: 'Título: {title}', text_prompt: '{text}'}\n",
     "row 1, column structured_prompt: the prompt lacks {negative}, {positive}"),
    ("  - {code: en-gb, prompt_language: en, display_name: British}\n",
     "row 1, column code: en-gb is already a review variety (lib/reviews/varieties.py)"),
])
def test_a_bad_varieties_file_is_one_line_naming_file_row_and_column(tmp_path, rows, problem):
    path = tmp_path / "varieties.yaml"
    path.write_text("varieties:\n" + rows, encoding="utf-8")
    assert reviews_option_problems({"reviews_varieties_file": str(path)}) == [
        f"--reviews-varieties-file: {path}: {problem}"]


def test_a_pair_with_an_undeclared_code_stops_the_run(isolated_data_dir, tmp_path, capsys):
    path = tmp_path / "varieties.yaml"
    path.write_text(VARIETIES_YAML, encoding="utf-8")
    assert main(["run", "--benchmarks", "reviews", "--reviews-varieties-file", str(path), "--reviews-pair", "pt-pt",
                 "pt-ao", "--out", str(tmp_path / "out")]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert errors == [f"error: --reviews-pair: unknown review variety pt-ao (known: tw, cn, en-gb, en-us, pt-pt, "
                      f"pt-br; varieties file {path})"]
    # without the file, its varieties are unknown too
    assert reviews_option_problems({"reviews_pair": ["pt-pt", "pt-br"]}) == [
        "--reviews-pair: unknown review variety pt-pt, pt-br (known: tw, cn, en-gb, en-us)"]
