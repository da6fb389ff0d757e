"""Linear-algebra primitives shared across families (Procrustes, Haar sampling, projections)."""

from veilbench.linalg.procrustes import haar_orthogonal, orthogonal_procrustes, polar_factor

__all__ = ["haar_orthogonal", "orthogonal_procrustes", "polar_factor"]
