"""Regional name choice (SC-TC-Bench Task 2): names, candidate lists, extraction, rates, tokenization."""
