"""Whole exchanges between real pi-post processes."""
