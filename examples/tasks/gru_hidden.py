import torch
import torch.nn as nn


class Model(nn.Module):
    """Multi-layer GRU (batch_first) over a sequence; returns only the final hidden state h_n."""

    def __init__(self, input_size, hidden_size, num_layers):
        super().__init__()
        self.gru = nn.GRU(input_size, hidden_size, num_layers=num_layers, batch_first=True)

    def forward(self, x):
        # x: (batch_size, seq_len, input_size); h_0 defaults to zeros
        _, h_n = self.gru(x)
        return h_n  # (num_layers, batch_size, hidden_size)


batch_size = 8
seq_len = 64
input_size = 64
hidden_size = 128
num_layers = 2


def get_inputs():
    return [torch.rand(batch_size, seq_len, input_size)]


def get_init_inputs():
    return [input_size, hidden_size, num_layers]
