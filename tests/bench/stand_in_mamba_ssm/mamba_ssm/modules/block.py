import torch

from mamba_ssm.ops.triton.layer_norm import RMSNorm, layer_norm_fn


class Block(torch.nn.Module):
    """mamba-ssm's Block as its callers see it: the constructor's arguments (fused add + norm needs
    an RMSNorm, as the real one asserts), a norm, a mixer, an optional second norm and MLP, and
    forward(hidden_states, residual) -> (mixer output, residual)."""

    def __init__(self, dim, mixer_cls, mlp_cls, norm_cls=torch.nn.LayerNorm, fused_add_norm=False,
                 residual_in_fp32=False):
        super().__init__()
        self.residual_in_fp32, self.fused_add_norm = residual_in_fp32, fused_add_norm
        self.norm = norm_cls(dim)
        self.mixer = mixer_cls(dim)
        assert mlp_cls is torch.nn.Identity, "the stand-in has no second norm and MLP"
        self.mlp = None
        assert not fused_add_norm or isinstance(self.norm, RMSNorm), "fused add + norm needs mamba-ssm's RMSNorm"

    def forward(self, hidden_states, residual=None, inference_params=None, **mixer_kwargs):
        hidden_states, residual = layer_norm_fn(hidden_states, self.norm.weight, self.norm.bias, residual=residual,
                                                prenorm=True, residual_in_fp32=self.residual_in_fp32,
                                                eps=self.norm.eps, is_rms_norm=True)
        return self.mixer(hidden_states, inference_params=inference_params, **mixer_kwargs), residual
