"""Bounded formal proofs of the netagg core's promises (``make formal``)."""
