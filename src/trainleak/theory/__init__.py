"""Pure, documented math behind attacks and bounds (no training, no data loading)."""
