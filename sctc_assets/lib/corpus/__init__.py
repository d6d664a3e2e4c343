"""Corpus counts: how many records of large text corpora contain each regional term form and each name."""
