"""Regional term choice (SC-TC-Bench Task 1): terms, prompts, labels and metrics."""
