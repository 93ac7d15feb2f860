import torch
import torch.nn.functional as F


class Mamba2(torch.nn.Module):
    """mamba-ssm's Mamba2 mixer as far as its caller sees it: the keyword arguments of its
    constructor (a name the real one lacks fails here too) and its parameters' shapes, so that the
    parameter count is the real one. The forward is a cheap mixing in place of the SSD kernels."""

    def __init__(self, d_model, d_state=128, d_conv=4, expand=2, headdim=64, ngroups=1, bias=False,
                 dt_min=0.001, dt_max=0.1, dt_init_floor=1e-4, dt_limit=(0.0, float("inf")), conv_bias=True,
                 chunk_size=256, layer_idx=None, device=None, dtype=None):
        super().__init__()
        factory = dict(device=device, dtype=dtype)
        self.d_inner = expand * d_model
        self.d_state, self.ngroups, self.chunk_size, self.dt_limit = d_state, ngroups, chunk_size, dt_limit
        assert self.d_inner % headdim == 0, "the heads are d_inner / headdim"
        nheads = self.d_inner // headdim
        conv_dim = self.d_inner + 2 * ngroups * d_state
        self.in_proj = torch.nn.Linear(d_model, self.d_inner + conv_dim + nheads, bias=bias, **factory)  # z, xBC, dt
        self.conv1d = torch.nn.Conv1d(conv_dim, conv_dim, d_conv, groups=conv_dim, padding=d_conv - 1,
                                      bias=conv_bias, **factory)
        self.dt_bias = torch.nn.Parameter(torch.zeros(nheads, **factory))
        self.A_log = torch.nn.Parameter(torch.zeros(nheads, **factory))
        self.D = torch.nn.Parameter(torch.ones(nheads, **factory))
        self.norm_weight = torch.nn.Parameter(torch.ones(self.d_inner, **factory))  # the gated RMSNorm's
        self.out_proj = torch.nn.Linear(self.d_inner, d_model, bias=bias, **factory)

    def forward(self, u, seqlen=None, seq_idx=None, cu_seqlens=None, inference_params=None):
        z, xbc, _ = torch.split(self.in_proj(u), [self.d_inner, self.conv1d.in_channels, self.D.numel()], dim=-1)
        xbc = F.silu(self.conv1d(xbc.transpose(1, 2))[..., :u.size(1)].transpose(1, 2))
        y = xbc[..., :self.d_inner] * F.silu(z)
        return self.out_proj(F.rms_norm(y, (self.d_inner,), self.norm_weight))
