import torch
import torch.nn as nn


class Model(nn.Module):
    """Softmax over the last dimension of a (batch_size, dim) tensor."""

    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.softmax(x, dim=-1)


batch_size = 512
dim = 32768


def get_inputs():
    return [torch.rand(batch_size, dim)]


def get_init_inputs():
    return []
