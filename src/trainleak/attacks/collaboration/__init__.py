"""Attacks on Data Collaboration uploads by a colluding analyst."""
