"""Attacks on unlearning releases: broadcast logs and re-release transcripts."""
