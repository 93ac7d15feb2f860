"""Stands in for state-spaces' mamba-ssm in the tests of tools/device/mamba_ssm_peer.py and
mamba2_ssm_peer.py (no CUDA kernels on the test machine): the modules the scripts import."""
