"""Attacks on an open-weight language model: passive membership scores (loss, zlib, reference
ratio, Min-K%, Min-K%++), n-sampling, and active reconstruction by reinforcement learning (ADRA
and ADRA+, Yin et al. 2026)."""
