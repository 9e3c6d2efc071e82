"""Privacy mechanisms whose outputs are releases (private linear regression)."""

from trainleak.systems.mechanisms.regression import (
    ridge_output_perturbation,
    ridge_sensitivity,
    sphere_records,
    subspace_records,
)

__all__ = ["ridge_output_perturbation", "ridge_sensitivity", "sphere_records", "subspace_records"]
