import torch
import torch.nn.functional as F


class RMSNorm(torch.nn.Module):
    """mamba-ssm's Triton RMSNorm as its callers see it: weight, no bias, eps."""

    def __init__(self, hidden_size, eps=1e-5, dropout_p=0.0, device=None, dtype=None):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.ones(hidden_size, device=device, dtype=dtype))
        self.register_parameter("bias", None)

    def forward(self, x, residual=None, prenorm=False, residual_in_fp32=False):
        return layer_norm_fn(x, self.weight, self.bias, residual=residual, eps=self.eps, prenorm=prenorm,
                             residual_in_fp32=residual_in_fp32, is_rms_norm=True)


def layer_norm_fn(x, weight, bias, residual=None, eps=1e-6, prenorm=False, residual_in_fp32=False,
                  is_rms_norm=False):
    """The fused add + norm in plain torch: the sum x + residual (fp32 when asked), normed; with
    prenorm also the sum, the next block's residual."""
    assert is_rms_norm and bias is None, "the stand-in norms as RMSNorm only"
    summed = x if residual is None else x + residual
    if residual_in_fp32:
        summed = summed.float()
    normed = F.rms_norm(summed.to(weight.dtype), (weight.numel(),), weight, eps).to(x.dtype)
    return (normed, summed) if prenorm else normed
