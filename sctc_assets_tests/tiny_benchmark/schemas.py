"""The column schema of each of the tiny benchmark's tables."""

from sctc_assets.lib.schemas.base import Column, TableSchemaSpec

MODEL = Column("model", "string", "Registry key of the model.")
LANG = Column("lang", "string", "Script of the question: zh_hans or zh_hant.")
ROW = Column("row", "int", "Position of the question within its script.")

SCHEMAS = (
    TableSchemaSpec("tiny_prompts", (LANG, ROW, Column("prompt", "string", "The question."),
                                     Column("expected", "string", "The word a right answer holds."))),
    TableSchemaSpec("tiny_responses", (MODEL, LANG, ROW, Column("prompt", "string", "The question."),
                                       Column("response", "string", "The model's answer."),
                                       Column("outcome", "string", "ok, refused or error."))),
    TableSchemaSpec("tiny_scores", (MODEL, LANG, ROW, Column("expected", "string", "The word a right answer holds."),
                                    Column("response", "string", "The model's answer."),
                                    Column("right", "bool", "Whether the answer holds the expected word."))),
    TableSchemaSpec("tiny_summary", (MODEL, LANG, Column("n", "int", "Answers scored."),
                                     Column("share_right", "float", "Share of answers holding the expected word."))),
)
