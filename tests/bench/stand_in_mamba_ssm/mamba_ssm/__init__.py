"""Stands in for state-spaces' mamba-ssm in the test of tools/device/mamba_ssm_peer.py (no CUDA
kernels on the test machine): the two modules the script imports, with a tiny model."""
