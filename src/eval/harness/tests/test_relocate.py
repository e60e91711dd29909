"""worker.relocate_tensors: a model's weights moved to fresh memory compute exactly as before,
and what shared a storage still does (an RNN's weights in cuDNN's one chunk, tied weights)."""

from __future__ import annotations

import torch

from kforge_harness.worker import relocate_tensors


def test_views_of_one_storage_stay_views_of_one_copy() -> None:
    flat = torch.arange(12, dtype=torch.float32)
    a = torch.nn.Parameter(flat[:6].view(2, 3))
    b = torch.nn.Parameter(flat[6:].view(3, 2).t())  # another offset, transposed strides
    old = a.untyped_storage().data_ptr()
    kept: list[object] = []
    moved = relocate_tensors([a, b], kept)
    assert moved == 12 * 4 and len(kept) == 1
    assert a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() != old
    assert torch.equal(a, flat[:6].view(2, 3)) and torch.equal(b, flat[6:].view(3, 2).t())
    assert (a.storage_offset(), b.storage_offset(), b.stride()) == (0, 6, (1, 2))
    assert isinstance(a, torch.nn.Parameter)


def test_a_module_computes_the_same_after_its_weights_move() -> None:
    torch.manual_seed(0)
    norm = torch.nn.BatchNorm1d(4)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), norm).eval()
    assert norm.running_mean is not None
    norm.running_mean.uniform_()
    x = torch.randn(5, 8)
    before = model(x)
    tensors = list(model.parameters()) + list(model.buffers())
    kept: list[object] = []
    relocate_tensors(tensors, kept)
    assert torch.equal(model(x), before)
    assert len(kept) == len({t.untyped_storage().data_ptr() for t in tensors})


def test_an_rnn_keeps_its_single_chunk_of_weights() -> None:
    rnn = torch.nn.RNN(4, 3, batch_first=True)
    x = torch.randn(2, 5, 4)
    before = rnn(x)[1]
    relocate_tensors(list(rnn.parameters()), [])
    assert torch.equal(rnn(x)[1], before)
    # every weight still in one storage, as flatten_parameters left them (where it applies)
    assert len({p.untyped_storage().data_ptr() for p in rnn.parameters()}) == \
        len({p.untyped_storage().data_ptr() for p in torch.nn.RNN(4, 3).parameters()})


def test_the_processes_move_every_few_rounds_never_before_the_first() -> None:
    from kforge_harness.timed import PLACEMENTS, RELOCATE_EVERY, relocating

    rounds = [i for i in range(200) if relocating(i)]
    assert rounds == [RELOCATE_EVERY * k for k in range(1, PLACEMENTS)]
